"""stepring against gymnasium.vector.SyncVectorEnv of Gymnasium's own envs.

For each built-in env and each autoreset mode, both vector envs (8 envs)
start from the same states (reset options low == high make the initial
state exact in both), take the same actions and must agree exactly on
spaces, dtypes, shapes, obs, rewards, flags and infos. When an episode ends,
each library draws the next initial state from its own RNG (stepring's is
not NumPy's): the autoreset step is compared by structure (where the obs
must lie, reward 0, flags, infos), then both re-synchronise those envs with
reset(options={"reset_mask": ended, "low": c, "high": c}) and the exact
comparison goes on. Needs Gymnasium (../shared/thirdparty/python on
PYTHONPATH): skipped without it.
"""
import math
import warnings

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium", reason="Gymnasium is not importable (put "
                          "../shared/thirdparty/python on PYTHONPATH)")
import stepring  # noqa: E402
from stepring.vector import _gym  # noqa: E402

if _gym is None:
    pytest.skip("stepring was imported without Gymnasium support", allow_module_level=True)

from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

N = 8
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]

# id: (exact reset options, steps to run, check that a row is a default reset)
ENVS = {
    "CartPole-v1": ({"low": 0.02, "high": 0.02}, 300,
                    lambda o: np.all(np.abs(o) <= 0.05)),
    "Acrobot-v1": ({"low": 0.05, "high": 0.05}, 520,
                   lambda o: o[0] >= math.cos(0.1) - 1e-6 and o[2] >= math.cos(0.1) - 1e-6
                   and abs(o[4]) <= 0.1 and abs(o[5]) <= 0.1),
    "MountainCar-v0": ({"low": -0.5, "high": -0.5}, 220,
                       lambda o: -0.6 <= o[0] <= -0.4 and o[1] == 0),
    "MountainCarContinuous-v0": ({"low": -0.5, "high": -0.5}, 1010,
                                 lambda o: -0.6 <= o[0] <= -0.4 and o[1] == 0),
    "Pendulum-v1": ({"x_init": 0.0, "y_init": 0.0}, 220,
                    lambda o: abs(o[2]) <= 1.0),
}


def make_pair(env_id, mode, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gym.make_vec(env_id, num_envs=N, vectorization_mode="sync",
                           vector_kwargs={"autoreset_mode": mode})
    ours = gym.make_vec("stepring/" + env_id, num_envs=N, autoreset_mode=mode, seed=1, **kw)
    return ref, ours


def actions_for(space, rng, steps):
    """The same action sequence for both; box actions sometimes out of
    bounds (both clip as Gymnasium's envs do)."""
    space.seed(int(rng.integers(1 << 30)))
    out = []
    for t in range(steps):
        a = space.sample()
        if isinstance(space, gym.spaces.Box) and t % 7 == 3:
            a = a * np.float32(1.7)
        out.append(a)
    return out


def close(a, b, what):
    """Equal up to float rounding. The dynamics are the same formulas in
    the same order; NumPy's vectorised sin/cos may differ from glibc's by
    an ulp on some CPUs (seen once in Acrobot after 444 steps: 4.7e-10)."""
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=what)


def same(a, b, what):
    assert type(a) is type(b), (what, type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape,
                                                           b.shape)
        if a.dtype == object:
            for x, y in zip(a, b):
                assert (x is None) == (y is None), what
                if x is not None:
                    same(x, y, what)
        elif a.dtype.kind == "f":
            close(a, b, what)
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)
    elif isinstance(a, dict):
        assert set(a) == set(b), (what, sorted(a), sorted(b))
        for k in a:
            same(a[k], b[k], "%s[%r]" % (what, k))
    else:
        assert a == b, (what, a, b)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_parity_with_sync_vector_env(env_id, mode):
    opts, steps, is_reset = ENVS[env_id]
    ref, ours = make_pair(env_id, mode)
    try:
        run_parity(env_id, mode, ref, ours, opts, steps, is_reset)
    finally:
        ref.close()
        ours.close()


def run_parity(env_id, mode, ref, ours, opts, steps, is_reset):
    if True:
        assert isinstance(ours, gym.vector.VectorEnv)
        assert ours.num_envs == ref.num_envs == N
        for name in ("single_observation_space", "single_action_space", "observation_space",
                     "action_space"):
            a, b = getattr(ours, name), getattr(ref, name)
            assert type(a) is type(b) and a == b, (name, a, b)
            assert a.dtype == b.dtype and a.shape == b.shape
        assert ours.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"] == mode
        assert ours.spec.id == "stepring/" + env_id
        assert ours.spec.max_episode_steps == ref.envs[0].spec.max_episode_steps

        o1, i1 = ref.reset(seed=3, options=dict(opts))
        o2, i2 = ours.reset(seed=3, options=dict(opts))
        same(o2, o1, "reset obs")
        same(i2, i1, "reset info")
        acts = actions_for(ours.action_space, np.random.default_rng(7), steps)
        ended_before = np.zeros(N, bool)  # NEXT_STEP: autoreset this step
        counts = {"ended": 0, "truncated": 0, "terminated": 0, "resync": 0, "raised": 0}
        for t, a in enumerate(acts):
            r1 = ref.step(a)
            r2 = ours.step(a)
            for x, y, what in zip(r2[:4], r1[:4], ("obs", "reward", "terminated",
                                                  "truncated")):
                assert type(x) is np.ndarray and x.dtype == y.dtype and x.shape == y.shape
            assert r2[0].flags.writeable and r2[0].flags.owndata  # copy=True: ours
            obs2, rew2, te2, tr2, info2 = r2
            obs1, rew1, te1, tr1, info1 = r1
            # Rows whose env was reset by the library (different RNGs):
            # structure only. Everything else: exact.
            fresh = ended_before if mode == AutoresetMode.NEXT_STEP else np.zeros(N, bool)
            done = te1 | tr1
            if mode == AutoresetMode.SAME_STEP:
                fresh = done
            keep = ~fresh
            close(obs2[keep], obs1[keep], "obs step %d" % t)
            close(rew2[keep], rew1[keep], "reward step %d" % t)
            np.testing.assert_array_equal(te2, te1, err_msg="terminated step %d" % t)
            np.testing.assert_array_equal(tr2, tr1, err_msg="truncated step %d" % t)
            if mode == AutoresetMode.NEXT_STEP:
                for i in np.flatnonzero(fresh):
                    assert rew1[i] == rew2[i] == 0.0 and not te2[i] and not tr2[i]
                    assert is_reset(obs1[i]) and is_reset(obs2[i]), (i, obs1[i], obs2[i])
            if mode == AutoresetMode.SAME_STEP:
                close(rew2, rew1, "reward step %d" % t)
                for i in np.flatnonzero(done):
                    assert is_reset(obs1[i]) and is_reset(obs2[i]), (i, obs1[i], obs2[i])
            same(info2, info1, "info at step %d" % t)
            counts["ended"] += int(done.sum())
            counts["truncated"] += int(tr1.sum())
            counts["terminated"] += int(te1.sum())
            resync = done if mode != AutoresetMode.NEXT_STEP else ended_before
            if mode == AutoresetMode.DISABLED and done.any() and not counts["raised"]:
                # Gymnasium asserts that no ended env is stepped; so do we
                # (before stepping any: SyncVectorEnv has stepped the envs
                # before the first ended one, so re-sync them all).
                with pytest.raises(AssertionError):
                    ref.step(a)
                with pytest.raises(AssertionError):
                    ours.step(a)
                counts["raised"] = 1
                resync = np.ones(N, bool)
            if resync.any():
                m = resync.copy()
                o1, i1 = ref.reset(options=dict(opts, reset_mask=m.copy()))
                o2, i2 = ours.reset(options=dict(opts, reset_mask=m.copy()))
                same(o2, o1, "re-sync reset obs at step %d" % t)
                same(i2, i1, "re-sync reset info")
                counts["resync"] += 1
                ended_before = np.zeros(N, bool)
                if mode == AutoresetMode.NEXT_STEP:
                    ended_before = done & ~m
            elif mode == AutoresetMode.NEXT_STEP:
                ended_before = done
        assert counts["ended"] > 0, counts  # the autoreset paths were taken
        if mode == AutoresetMode.DISABLED:
            assert counts["raised"]
        if env_id in ("CartPole-v1",):
            assert counts["terminated"] > 0
        if env_id in ("Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0",
                      "Acrobot-v1"):
            assert counts["truncated"] > 0, counts


def test_make_vec_spec_kwargs_and_modes():
    """gymnasium.make_vec("stepring/...") passes keywords through, takes
    AutoresetMode and Gymnasium's names, honours max_episode_steps."""
    e = gym.make_vec("stepring/CartPole-v1", num_envs=3, seed=0, max_episode_steps=7,
                     autoreset_mode="SameStep")
    with e:
        assert e.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        assert e.spec.kwargs["max_episode_steps"] == 7
        obs, _ = e.reset(options={"low": 0.0, "high": 0.0})
        for t in range(7):
            obs, r, te, tr, info = e.step(np.array([0, 1, 0]) if t % 2 else np.array([1, 0, 1]))
        assert tr.all() and not te.any() and info["_final_obs"].all()
    for m in ("next_step", "NextStep", AutoresetMode.NEXT_STEP):
        with stepring.make_vec("CartPole-v1", 2, autoreset_mode=m) as e:
            assert e.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    with pytest.raises(ValueError):
        stepring.make_vec("CartPole-v1", 2, autoreset_mode="SomeStep")
    assert "stepring/Pendulum-v1" in gym.envs.registry
    assert gym.spec("stepring/CartPole-v1").max_episode_steps == 500


def test_seed_lists_and_np_random():
    with stepring.make_vec("CartPole-v1", 4) as e:
        obs, _ = e.reset(seed=[5, 5, 6, None])
        np.testing.assert_array_equal(obs[0], obs[1])  # equal seeds, equal episodes
        assert not np.array_equal(obs[0], obs[2])
        with pytest.raises(ValueError):
            e.reset(seed=[1, 2])
        with pytest.raises(ValueError):
            e.reset(seed=[1, 2, 3, -4])
        e.reset(seed=11)
        g = e.np_random
        assert isinstance(g, np.random.Generator)
        # SyncVectorEnv's np_random_seed: each env's seed (rng=numpy: s + i)
        assert e.np_random_seed == (11, 12, 13, 14) == e.get_attr("np_random_seed")
        assert e.get_attr("action_space") == (e.single_action_space,) * 4
        assert e.call("observation_space")[0] == e.single_observation_space
        assert e.get_attr("gravity") == (9.8,) * 4
        with pytest.raises(AttributeError):
            e.get_attr("no_such_attribute")
        with pytest.raises(AttributeError):
            e.set_attr("spec", 1.0)
        with pytest.raises(NotImplementedError, match="render"):
            e.render()
