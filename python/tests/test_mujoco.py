"""The MuJoCo envs through the Python binding, against Gymnasium's own env
classes run by the MuJoCo reference kit (its stand-in for the `mujoco`
package, on the same libmujoco 2.2.2; ../shared/mujoco).

gymnasium.make_vec("stepring/Hopper-v5", num_envs=N, seed=s): env i starts
as Gymnasium's env after reset(seed=s + i) and, stepped with the same
actions, gives the same float64 observations, rewards and flags, to the bit
(the sin/cos entries of Reacher and InvertedDoublePendulum within 1e-15:
NumPy's own sin/cos on AVX-512 machines). Skipped without MuJoCo in the
build, and while the pool refuses float64 observations ("not supported by
the pool yet"); the parity test also without the kit.
"""
import os
import sys

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium", reason="Gymnasium is not importable (put "
                          "../shared/thirdparty/python on PYTHONPATH)")
import stepring  # noqa: E402

KIT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                    "mujoco"))

if "Hopper-v5" not in stepring.list_envs():
    pytest.skip("stepring was built without MuJoCo", allow_module_level=True)


def make(env_id, n, seed, **kw):
    try:
        return gym.make_vec("stepring/" + env_id, num_envs=n, seed=seed, **kw)
    except Exception as e:  # the pool's -ENOTSUP, until it carries float64 rows
        if "not supported by the pool yet" in str(e):
            pytest.skip("the pool refuses float64 observations: %s" % e)
        raise


def test_listed():
    ids = stepring.list_envs()
    for name in ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "HumanoidStandup",
                 "InvertedPendulum", "InvertedDoublePendulum", "Reacher", "Swimmer", "Pusher"):
        assert name + "-v5" in ids and name + "-v4" in ids
    assert "stepring/Hopper-v5" in gym.envs.registry


def test_spaces():
    envs = make("Hopper-v5", 3, 0)
    try:
        assert envs.single_observation_space.dtype == np.float64
        assert envs.single_observation_space.shape == (11,)
        assert envs.single_action_space.dtype == np.float32
        assert envs.single_action_space.shape == (3,)
        obs, _ = envs.reset(seed=0)
        assert obs.dtype == np.float64 and obs.shape == (3, 11)
    finally:
        envs.close()


def gymnasium_envs(env_id, n):
    """n of Gymnasium's own envs on the kit's mujoco stand-in."""
    if not os.path.isfile(os.path.join(KIT, "__init__.py")):
        pytest.skip("no MuJoCo reference kit at %s" % KIT)
    parent = os.path.dirname(KIT)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    return [gym.make(env_id) for _ in range(n)]


TRIG = {"Reacher-v5": slice(0, 4), "InvertedDoublePendulum-v5": slice(1, 5)}


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Ant-v5", "Reacher-v5",
                                    "InvertedDoublePendulum-v5", "HalfCheetah-v4"])
def test_parity_with_gymnasium(env_id):
    n, seed, steps = 4, 11, 40
    envs = make(env_id, n, seed)
    refs = gymnasium_envs(env_id, n)
    try:
        obs, _ = envs.reset(seed=seed)
        want = np.stack([r.reset(seed=seed + i)[0] for i, r in enumerate(refs)])
        trig = TRIG.get(env_id)

        def same(a, b):
            if trig is None:
                return np.array_equal(a, b)
            keep = np.ones(a.shape[-1], bool)
            keep[trig] = False
            return (np.array_equal(a[..., keep], b[..., keep]) and
                    np.max(np.abs(a[..., trig] - b[..., trig])) <= 1e-15)

        assert same(obs, want)
        rng = np.random.default_rng(5)
        live = np.ones(n, bool)
        space = envs.single_action_space
        for _ in range(steps):
            act = rng.uniform(space.low, space.high, (n,) + space.shape).astype(np.float32)
            obs, rew, term, trunc, _ = envs.step(act)
            for i, r in enumerate(refs):
                if not live[i]:
                    continue
                o, rr, t, tr, _ = r.step(act[i])
                assert same(obs[i], o) and rew[i] == rr and term[i] == t and trunc[i] == tr
                if t or tr:
                    live[i] = False  # stepring autoresets from here on: stop comparing
            if not live.any():
                break
    finally:
        envs.close()
        for r in refs:
            r.close()
