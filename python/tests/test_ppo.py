"""The PPO example learns CartPole-v1 through Gymnasium's vector API on
stepring (slow: a minute or more). Needs Gymnasium."""
import importlib.util
import os

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the example is written for Gymnasium (put "
                    "../shared/thirdparty/python on PYTHONPATH)")

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "ppo_cartpole.py")


def load_example():
    spec = importlib.util.spec_from_file_location("ppo_cartpole", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_ppo_reaches_195_within_budget():
    ppo = load_example()
    # A fixed budget of 60k env steps; training stops early once a greedy
    # evaluation over 20 episodes reaches 195 (CartPole-v0's "solved").
    args = ppo.parse(["--total-steps", "60000", "--target", "195", "--seed", "1",
                      "--log-every", "1000000"])
    r = ppo.train(args, log=lambda *a: None)
    assert r["steps"] <= 60000
    assert len(r["eval_returns"]) == 20
    assert r["eval_mean"] >= 195, "mean return %.1f after %d steps" % (r["eval_mean"], r["steps"])
    assert np.all(r["eval_returns"] > 0)


def test_ppo_example_cli_parses():
    ppo = load_example()
    a = ppo.parse([])
    assert a.env == "CartPole-v1" and a.num_envs == 8 and a.target == 475 and not a.twin
    assert ppo.parse(["--twin"]).twin


def test_ppo_twins_differ_in_one_line():
    """make_envs: the stepring line and the SyncVectorEnv line."""
    ppo = load_example()
    import gymnasium as gym
    import stepring
    a = ppo.parse([])
    e = ppo.make_envs(a, 2, 0)
    assert isinstance(e, stepring.VectorEnv) and isinstance(e, gym.vector.VectorEnv)
    e.close()
    e = ppo.make_envs(ppo.parse(["--twin"]), 2, 0)
    assert isinstance(e, gym.vector.SyncVectorEnv)
    e.close()
