"""A seeded stepring pool is SyncVectorEnv of Gymnasium's env with that seed.

With rng=numpy (the default of make_vec and gymnasium.make_vec
("stepring/...")), env i of a pool reset with seed s draws from NumPy's
Generator(PCG64(SeedSequence(s + i))), as Gymnasium's env after
reset(seed=s + i) does, and keeps drawing from it at every autoreset (no
reseeding, as Gymnasium). So for each built-in env and autoreset mode, the
same seed and the same (seeded, random) actions give the same obs (float32
rounding), rewards and flags as SyncVectorEnv for 1,000 steps, every
autoreset included, without the re-synchronising resets test_gym_parity.py
needs for rng=stepring. Needs Gymnasium (../shared/thirdparty/python on
PYTHONPATH): skipped without it.
"""
import os
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

N = 4
STEPS = 1000
SEED = 123
ENVS = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0",
        "Acrobot-v1"]
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
# Reset options of each env (Gymnasium's names), for the reset-options test.
OPTS = {"CartPole-v1": {"low": -0.2, "high": 0.15},
        "Pendulum-v1": {"x_init": 0.5, "y_init": 0.25},
        "MountainCar-v0": {"low": -0.9, "high": -0.1},
        "MountainCarContinuous-v0": {"low": -0.9, "high": -0.1},
        "Acrobot-v1": {"low": -0.3, "high": 0.2}}


def reference(env_id, mode, n=N):
    """SyncVectorEnv of Gymnasium's own env (TimeLimit included)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SyncVectorEnv([lambda: gym.make(env_id) for _ in range(n)],
                             autoreset_mode=mode)


# The stepring pools under test: a thread pool from each Gymnasium-facing
# constructor with its defaults (rng=numpy), and one forced onto 2 worker
# threads (envs split between threads: the seeds must follow the global
# env index, not the thread's).
POOLS = {
    "gym.make_vec": lambda env_id, mode, seed: gym.make_vec(
        "stepring/" + env_id, num_envs=N, autoreset_mode=mode, seed=seed),
    "make_vec-2threads": lambda env_id, mode, seed: stepring.make_vec(
        env_id, N, autoreset_mode=mode, seed=seed, num_threads=2),
}


def close(a, b, what):
    """Equal up to float rounding: the same formulas in the same order;
    NumPy's scalar sin/cos may differ from glibc's by an ulp on some CPUs
    (see test_gym_parity.py), which shows here as a few float32 ulps."""
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=what)


def actions(space, steps, seed):
    """A seeded random action sequence (Gymnasium's own sampler)."""
    space.seed(seed)
    return [space.sample() for _ in range(steps)]


def final_obs(info):
    """{env: final obs} of a same_step info."""
    if "final_obs" not in info:
        return {}
    return {int(i): np.asarray(info["final_obs"][i]) for i in np.flatnonzero(info["_final_obs"])}


def run(ref, ours, mode, steps, seed, reset_seed=SEED, opts=None):
    """Step both with the same actions; compare everything each step.
    Returns counts of what happened."""
    o1, _ = ref.reset(seed=reset_seed, options=dict(opts) if opts else None)
    o2, _ = ours.reset(seed=reset_seed, options=dict(opts) if opts else None)
    assert o2.dtype == o1.dtype == np.float32
    close(o2, o1, "reset obs")
    counts = {"terminated": 0, "truncated": 0, "autoresets": 0}
    for t, a in enumerate(actions(ref.action_space, steps, seed)):
        obs1, rew1, te1, tr1, info1 = ref.step(a)
        obs2, rew2, te2, tr2, info2 = ours.step(a)
        close(obs2, obs1, "obs step %d" % t)
        close(rew2, rew1, "reward step %d" % t)
        np.testing.assert_array_equal(te2, te1, err_msg="terminated step %d" % t)
        np.testing.assert_array_equal(tr2, tr1, err_msg="truncated step %d" % t)
        if mode == AutoresetMode.SAME_STEP:
            f1, f2 = final_obs(info1), final_obs(info2)
            assert sorted(f1) == sorted(f2) == list(np.flatnonzero(te1 | tr1)), t
            for i in f1:
                close(f2[i], f1[i], "final obs of env %d step %d" % (i, t))
        counts["terminated"] += int(te1.sum())
        counts["truncated"] += int(tr1.sum())
        done = te1 | tr1
        if done.any():
            counts["autoresets"] += int(done.sum())
            if mode == AutoresetMode.DISABLED:
                # No autoreset: the caller resets the ended envs, which
                # draw from their generators where they are (no seed).
                o1, _ = ref.reset(options={"reset_mask": done.copy()})
                o2, _ = ours.reset(options={"reset_mask": done.copy()})
                close(o2, o1, "reset_mask obs step %d" % t)
    return counts


@pytest.mark.parametrize("pool", sorted(POOLS))
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", ENVS)
def test_seeded_pool_is_sync_vector_env(env_id, mode, pool):
    ref = reference(env_id, mode)
    ours = POOLS[pool](env_id, mode, SEED)
    try:
        assert ours.metadata["autoreset_mode"] == mode
        counts = run(ref, ours, mode, STEPS, seed=7)
    finally:
        ref.close()
        ours.close()
    # The autoreset paths were taken, several times per env on average.
    assert counts["autoresets"] >= N, counts
    if env_id == "CartPole-v1":
        assert counts["terminated"] > N
    else:  # random actions rarely solve these: the time limit ends them
        assert counts["truncated"] >= N, counts


@pytest.mark.parametrize("env_id", ENVS)
def test_reseed_lists_and_reset_options(env_id):
    """Reseeding a running pool (another int, a list of seeds), reset
    options (Gymnasium's low/high or x_init/y_init) with rng=numpy, and a
    pool made without a seed: each as SyncVectorEnv."""
    mode = AutoresetMode.NEXT_STEP
    ref = reference(env_id, mode)
    ours = stepring.make_vec(env_id, N, autoreset_mode=mode)  # no seed at creation
    try:
        run(ref, ours, mode, 150, seed=1, reset_seed=5)
        run(ref, ours, mode, 150, seed=2, reset_seed=[11, 3, 3, 2**64 - 2])
        run(ref, ours, mode, 150, seed=3, reset_seed=9, opts=OPTS[env_id])
        # Options on an unseeded reset: the generators continue.
        o1, _ = ref.reset(options=dict(OPTS[env_id]))
        o2, _ = ours.reset(options=dict(OPTS[env_id]))
        close(o2, o1, "reset with options, no seed")
    finally:
        ref.close()
        ours.close()


@pytest.mark.parametrize("env_id", ENVS)
def test_reset_obs_are_numpys_draws(env_id):
    """Independently of Gymnasium: after reset(seed=s), env i's obs are
    the float32 of NumPy's default_rng(s + i).uniform draws in the env's
    order (4 for CartPole and Acrobot, cast to float32 before the obs for
    Acrobot; theta then theta_dot for Pendulum; the position for the
    mountain cars), seed + i carrying past 2^64 as Python's int does."""
    for s in (0, 2**64 - 2):
        with stepring.make_vec(env_id, 3, seed=s) as e:
            obs, _ = e.reset(seed=s)
        for i in range(3):
            g = np.random.default_rng(s + i)
            if env_id == "CartPole-v1":
                want = g.uniform(-0.05, 0.05, size=4).astype(np.float32)
            elif env_id == "Acrobot-v1":
                th = g.uniform(-0.1, 0.1, size=4).astype(np.float32).astype(np.float64)
                want = np.array([np.cos(th[0]), np.sin(th[0]), np.cos(th[1]), np.sin(th[1]),
                                 th[2], th[3]], dtype=np.float32)
            elif env_id == "Pendulum-v1":
                th, thdot = g.uniform(np.array([-np.pi, -1.0]), np.array([np.pi, 1.0]))
                want = np.array([np.cos(th), np.sin(th), thdot], dtype=np.float32)
            else:
                want = np.array([g.uniform(-0.6, -0.4), 0.0], dtype=np.float32)
            close(obs[i], want, "%s env %d seed %d" % (env_id, i, s))


def test_rng_choice_and_checkpoints(tmp_path):
    """rng='stepring' is the C library's default stream (other episodes);
    a checkpoint of an rng=numpy pool restores the PCG64 states bit-exactly
    (the same continuation) and is refused by a pool of the other RNG."""
    with stepring.make_vec("CartPole-v1", N, seed=1, rng="stepring") as a, \
            stepring.make_vec("CartPole-v1:rng=stepring", N, seed=1) as b, \
            stepring.make_vec("CartPole-v1", N, seed=1) as c:
        oa, ob, oc = a.reset(seed=1)[0], b.reset(seed=1)[0], c.reset(seed=1)[0]
        assert np.array_equal(oa, ob) and not np.array_equal(oa, oc)
    path = os.fspath(tmp_path / "np.ckpt")
    acts = actions(gym.spaces.MultiDiscrete([2] * N), 400, 5)
    with stepring.make_vec("CartPole-v1", N, seed=4) as e:
        e.reset(seed=4)
        for a in acts[:150]:
            e.step(a)
        e.checkpoint(path, backend="sync")
        assert e.checkpoint_poll()[0]
        tail = [e.step(a)[:4] for a in acts[150:]]
    with stepring.make_vec("CartPole-v1", N, seed=99) as f:
        f.reset()
        f.restore(path)
        for t, a in enumerate(acts[150:]):
            got = f.step(a)[:4]
            for x, y in zip(got, tail[t]):
                assert np.array_equal(x, y), t
    with stepring.make_vec("CartPole-v1", N, seed=4, rng="stepring") as g:
        g.reset()
        with pytest.raises(ValueError):
            g.restore(path)


def test_bad_rng_names():
    for bad in ("CartPole-v1:rng=mt19937", "Pendulum-v1:rng=", "Acrobot-v1:gravity=1",
                "CartPole-v1:rng=numpy,rng=numpy", "spin:rng=pcg"):
        with pytest.raises(ValueError) as ei:
            stepring.make_vec(bad, 2, rng=None)
        assert "rng" in str(ei.value) or "parameter" in str(ei.value), str(ei.value)
    with pytest.raises(ValueError):
        stepring.make_vec("MountainCar-v0", 2, rng="mt19937")
    # spin takes rng= too (it draws every step), next to its own parameters
    with stepring.make_vec("spin:obs_dim=4", 2, seed=0) as s:
        assert s.reset(seed=0)[0].shape == (2, 4)
