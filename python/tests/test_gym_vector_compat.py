"""What Gymnasium's own vector tests check, on both stepring pools (thread
pools of the C envs, process pools of Python envs): np_random_seed as a tuple
of per-env seeds, SyncVectorEnv's refusals of bad reset masks, seed lists and
scalar actions (with its exception types), a closed env, and get_attr /
set_attr / call of env parameters taking effect as in Gymnasium
(issue 32, items 2-4). tools/gym_vector_tests.py runs Gymnasium's tests
themselves when their source is at hand. Needs Gymnasium.
"""
import contextlib
import re
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


def sync(env_id, n, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SyncVectorEnv([lambda: gym.make(env_id) for _ in range(n)], **kw)


def threads(n=4, env_id="CartPole-v1", **kw):
    return stepring.make_vec(env_id, n, **kw)


def procs(n=4, env_id="CartPole-v1", **kw):
    kw.setdefault("num_workers", 2)
    return stepring.make_vec(env_fns=[lambda: gym.make(env_id)] * n, **kw)


closing = contextlib.closing  # a process pool is no context manager of its own


POOLS = {"threads": threads, "procs": procs}


# --- item 2: np_random_seed -----------------------------------------------

@pytest.mark.parametrize("pool", POOLS)
def test_np_random_seed_is_a_tuple_of_per_env_seeds(pool):
    with closing(POOLS[pool](4, autoreset_mode="disabled")) as e:
        ref = sync("CartPole-v1", 4, autoreset_mode=AutoresetMode.DISABLED)
        for r in (e, ref):
            r.reset(seed=42)
        assert e.np_random_seed == ref.np_random_seed == (42, 43, 44, 45)
        for r in (e, ref):
            r.reset()  # seed=None: the seeds stay
        assert e.np_random_seed == ref.np_random_seed == (42, 43, 44, 45)
        for r in (e, ref):
            r.reset(seed=[7, None, 9, 7])
        assert e.np_random_seed == ref.np_random_seed == (7, 43, 9, 7)
        # a masked reset reseeds only the envs it resets
        for r in (e, ref):
            r.reset(seed=[1, 2, 3, 4], options={"reset_mask": np.array([0, 1, 0, 1], bool)})
        assert e.np_random_seed == ref.np_random_seed == (7, 2, 9, 4)
        assert e.get_attr("np_random_seed") == e.np_random_seed
        # the seeds are the envs' true seeds: the same episodes as Gymnasium's
        o1, _ = e.reset(seed=5)
        o2, _ = ref.reset(seed=5)
        np.testing.assert_array_equal(o1, o2)


def test_np_random_seed_before_any_reset():
    # A thread pool made without a seed is seeded with 0: env i with i.
    with threads(4) as e:
        assert e.np_random_seed == (0, 1, 2, 3)
    with threads(4, seed=10) as e:
        assert e.np_random_seed == (10, 11, 12, 13)
    # rng=stepring: the (seed, index) pairs of the C RNG
    with threads(3, seed=10, rng="stepring") as e:
        assert e.np_random_seed == ((10, 0), (10, 1), (10, 2))
    # a process pool made with seed=s: env i's first reset uses s + i
    with closing(procs(4, seed=10)) as e:
        assert e.np_random_seed == (10, 11, 12, 13)
        o1, _ = e.reset()
        ref = sync("CartPole-v1", 4)
        o2, _ = ref.reset(seed=10)
        np.testing.assert_array_equal(o1, o2)
    # without a seed its envs draw their own, as SyncVectorEnv's
    with closing(procs(4)) as e:
        s = e.np_random_seed
        assert len(set(s)) == 4 and all(isinstance(x, int) for x in s)
        e.reset()
        assert e.np_random_seed == s


# --- item 3: SyncVectorEnv's refusals ------------------------------------------

BAD_MASKS = [
    (np.array([True]), "must have shape `(3,)`, got (1,)"),
    (np.array([True, True, False, False]), "must have shape `(3,)`, got (4,)"),
    (np.array([[True, True, True]]), "must have shape `(3,)`, got (1, 3)"),
    (np.array([False, False, False]),
     "must contain a boolean array, got reset_mask=[False False False]"),
    (np.array([1, 1, 0]), "must have `dtype=np.bool_`, got int64"),
    (np.array([1.0, 1.0, 0.0]), "must have `dtype=np.bool_`, got float64"),
    ([True, True, False], "must be a numpy array, got <class 'list'>"),
]


@pytest.mark.parametrize("pool", POOLS)
def test_bad_reset_masks_are_refused_as_sync_vector_env_refuses_them(pool):
    ref = sync("CartPole-v1", 3, autoreset_mode=AutoresetMode.DISABLED)
    with closing(POOLS[pool](3, autoreset_mode="disabled", seed=0)) as e:
        for r in (e, ref):
            r.reset(seed=[0, 1, 2])
            r.reset(options={"reset_mask": np.array([True, True, True])})
        for mask, msg in BAD_MASKS:
            for r in (ref, e):
                with pytest.raises(AssertionError, match=re.escape(msg)):
                    r.reset(options={"reset_mask": mask})
            with pytest.raises(ValueError, match=re.escape(msg)):
                e.reset(options={"reset_mask": mask})
        # nothing was reset by the refusals: the same steps as the reference
        a = np.array([1, 0, 1])
        o1 = e.step(a)[0]
        o2 = ref.step(a)[0]
        np.testing.assert_array_equal(o1, o2)
        # a seed list of another length: SyncVectorEnv asserts it
        for r in (ref, e):
            with pytest.raises(AssertionError):
                r.reset(seed=[1, 2])
        with pytest.raises(ValueError):
            e.reset(seed=[1, 2])


@pytest.mark.parametrize("pool", POOLS)
def test_action_counts_and_scalar_actions(pool):
    ref = sync("CartPole-v1", 4, autoreset_mode=AutoresetMode.DISABLED)
    twin = sync("CartPole-v1", 4, autoreset_mode=AutoresetMode.DISABLED)
    with closing(POOLS[pool](4, autoreset_mode="disabled", seed=0)) as e:
        for r in (e, ref, twin):
            r.reset(seed=0)
        good = np.array([0, 1, 1, 0])
        for r in (ref, e):
            with pytest.raises(ValueError):
                r.step(good[:3])
            with pytest.raises(ValueError):
                r.step(np.concatenate([good, good[:1]]))
            with pytest.raises(TypeError):
                r.step(0)
        with pytest.raises(ValueError):  # also a ValueError, as stepring's
            e.step(0)
        # Nothing was stepped by the refused calls (SyncVectorEnv steps the
        # envs its zip reached before it raises: compare with a twin that
        # never saw them).
        np.testing.assert_array_equal(e.step(good)[0], twin.step(good)[0])


@pytest.mark.parametrize("pool", POOLS)
def test_closed_env(pool):
    e = POOLS[pool](2)
    e.close()
    for call in (lambda: e.reset(), lambda: e.step(np.zeros(2, np.int64))):
        with pytest.raises(gym.error.ClosedEnvironmentError):
            call()
        with pytest.raises(RuntimeError):
            call()


# --- item 4: attributes ------------------------------------------------------

# Each classic-control env's settable parameters, changed.
NEW = {
    "CartPole-v1": {"gravity": 12.5, "masspole": 0.2, "total_mass": 1.3, "length": 0.7,
                    "polemass_length": 0.09, "force_mag": 7.5, "tau": 0.03},
    "Pendulum-v1": {"max_speed": 6.0, "max_torque": 1.5, "dt": 0.04, "g": 9.81, "m": 1.2,
                    "l": 0.8},
    "MountainCar-v0": {"min_position": -1.1, "max_position": 0.55, "max_speed": 0.06,
                       "goal_position": 0.45, "goal_velocity": 0.001, "force": 0.0015,
                       "gravity": 0.002},
    "MountainCarContinuous-v0": {"min_position": -1.1, "max_position": 0.55,
                                 "max_speed": 0.06, "goal_position": 0.4,
                                 "goal_velocity": 0.001, "power": 0.002},
    "Acrobot-v1": {"dt": 0.15, "LINK_LENGTH_1": 1.1, "LINK_MASS_1": 0.9, "LINK_MASS_2": 1.2,
                   "LINK_COM_POS_1": 0.45, "LINK_COM_POS_2": 0.55, "LINK_MOI": 1.1},
}


def close(a, b, what):
    """Equal up to float rounding (NumPy's scalar sin/cos against glibc's, as
    test_seed_parity.py)."""
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("env_id", sorted(NEW))
def test_set_attr_takes_effect_as_in_gymnasium(env_id):
    """set_attr of every settable parameter on a live pool (between steps,
    mid-episode), against SyncVectorEnv of Gymnasium's env given the same
    attributes: the same obs, rewards and flags for 300 steps."""
    n = 4
    ref = sync(env_id, n)
    with threads(n, env_id) as e:
        assert set(NEW[env_id]) <= set(e._params())
        for k in NEW[env_id]:
            assert e.get_attr(k) == ref.get_attr(k), k
        o1, _ = e.reset(seed=3)
        o2, _ = ref.reset(seed=3)
        close(o1, o2, "reset")
        space = ref.action_space
        space.seed(4)
        for t in range(300):
            if t == 5:
                for k, v in NEW[env_id].items():
                    e.set_attr(k, v)
                    ref.set_attr(k, v)
                    assert e.get_attr(k) == ref.get_attr(k) == (v,) * n
            a = space.sample()
            r1, r2 = e.step(a), ref.step(a)
            close(r1[0], r2[0], "obs step %d" % t)
            close(r1[1], r2[1], "reward step %d" % t)
            np.testing.assert_array_equal(r1[2], r2[2])
            np.testing.assert_array_equal(r1[3], r2[3])
    # and the values change the dynamics: a pool with the defaults differs
    with threads(n, env_id) as d, threads(n, env_id) as e:
        for k, v in NEW[env_id].items():
            e.set_attr(k, v)
        d.reset(seed=3)
        e.reset(seed=3)
        a = np.stack([space.sample() for _ in range(20)])
        differ = False
        for t in range(20):
            differ |= not np.array_equal(d.step(a[t])[0], e.step(a[t])[0])
        assert differ


def test_parameters_as_make_keywords_and_in_the_id():
    """gymnasium.make's keywords (Pendulum's g) go to make_vec as they go to
    gymnasium.make; any parameter works in the id too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = SyncVectorEnv([lambda: gym.make("Pendulum-v1", g=1.62)] * 2)
    for e in (gym.make_vec("stepring/Pendulum-v1", num_envs=2, g=1.62),
              stepring.make_vec("Pendulum-v1:g=1.62", 2)):
        with e:
            assert e.get_attr("g") == (1.62, 1.62)
            o1, _ = e.reset(seed=1)
            o2, _ = ref.reset(seed=1)
            for _ in range(50):
                a = np.full((2, 1), 0.7, np.float32)
                o1, o2 = e.step(a)[0], ref.step(a)[0]
            close(o1, o2, "Pendulum g=1.62")
    with threads(2, goal_velocity=0.01, env_id="MountainCar-v0") as e:
        assert e.get_attr("goal_velocity") == (0.01, 0.01)
    with pytest.raises(TypeError):
        threads(2, g="strong", env_id="Pendulum-v1")


def test_what_set_attr_refuses():
    with threads(4) as e:
        assert e.get_attr("x_threshold") == (2.4,) * 4
        assert e.call("masscart") == (1.0,) * 4
        e.set_attr("gravity", [20.0, 20.0, 20.0, 20.0])  # one value for all: fine
        assert e.get_attr("gravity") == (20.0,) * 4
        # different values per env: the envs of a pool share the parameter
        with pytest.raises(ValueError, match="share their parameters"):
            e.set_attr("gravity", [9.81, 3.72, 8.87, 1.62])
        # SyncVectorEnv's rule for the count of values
        with pytest.raises(ValueError, match="length equal to the number of environments"):
            e.set_attr("gravity", [1.0, 2.0])
        for name, why in (("x_threshold", "compiled in"), ("masscart", "set total_mass")):
            with pytest.raises(ValueError, match=why):
                e.set_attr(name, 3.0)
        with pytest.raises(ValueError, match="finite"):
            e.set_attr("gravity", float("nan"))
        with pytest.raises(TypeError):
            e.set_attr("gravity", "strong")
        with pytest.raises(AttributeError, match="gravity, masspole"):
            e.get_attr("no_such_thing")
        with pytest.raises(AttributeError):
            e.set_attr("no_such_thing", 1)
        assert e.get_attr("gravity") == (20.0,) * 4  # nothing changed by the refusals
    with threads(4, mode="async", batch_size=2) as e:
        with pytest.raises(ValueError, match="sync pools only"):
            e.set_attr("gravity", 3.0)


def test_checkpoints_record_the_parameters(tmp_path):
    path = str(tmp_path / "g.ckpt")
    with threads(4, seed=1) as e:
        e.reset()
        e.set_attr("gravity", 15.0)
        e.checkpoint(path)
        with threads(4, seed=1) as d:  # default gravity: refused, unchanged
            with pytest.raises(ValueError, match="parameters"):
                d.restore(path)
        with threads(4, seed=1, gravity=15.0) as d:
            d.restore(path)
            a = np.array([1, 0, 0, 1])
            np.testing.assert_array_equal(d.step(a)[0], e.step(a)[0])
            assert d.np_random_seed == (-1,) * 4  # the checkpoint's RNGs: unknown seeds


@pytest.mark.skipif("LunarLander-v3" not in stepring.list_envs(), reason="built without Box2D")
def test_box2d_parameters():
    with gym.make_vec("stepring/LunarLander-v3", num_envs=2, enable_wind=True,
                      wind_power=10.0) as e:
        assert e.get_attr("enable_wind") == (True, True)
        assert e.get_attr("wind_power") == (10.0, 10.0)
        assert e.get_attr("gravity") == (-10.0, -10.0)
        assert e.get_attr("continuous") == (False, False)
        with pytest.raises(ValueError, match="replays the running episode"):
            e.set_attr("wind_power", 5.0)
    with stepring.make_vec("BipedalWalker-v3", 1) as e:
        assert e.get_attr("hardcore") == (False,)
        with pytest.raises(ValueError, match="not implemented"):
            e.set_attr("hardcore", True)


@pytest.mark.parametrize("inline", [True, False])
def test_process_pool_attributes_live_in_the_workers(inline):
    """A process pool's get_attr / set_attr / call act on each env in its
    worker (inline worker 0 and the worker processes), as SyncVectorEnv's on
    its envs: per-env values, methods with arguments, the envs' own errors."""
    ref = sync("CartPole-v1", 6)
    with closing(procs(6, num_workers=2, seed=0, inline=inline)) as e:
        vals = [9.81, 3.72, 8.87, 1.62, 24.79, 10.44]
        for r in (e, ref):
            r.set_attr("gravity", vals)
        assert e.get_attr("gravity") == ref.get_attr("gravity") == tuple(vals)
        for r in (e, ref):
            r.set_attr("force_mag", 5.0)
        assert e.get_attr("force_mag") == (5.0,) * 6
        # the values take effect in the envs' steps
        o1, _ = e.reset(seed=2)
        o2, _ = ref.reset(seed=2)
        ref.action_space.seed(0)
        for _ in range(30):
            a = ref.action_space.sample()
            o1, o2 = e.step(a)[0], ref.step(a)[0]
        np.testing.assert_array_equal(o1, o2)
        assert e.call("get_wrapper_attr", "tau") == (0.02,) * 6
        with pytest.raises(AttributeError):
            e.get_attr("no_such_thing")
        with pytest.raises(ValueError, match="length equal"):
            e.set_attr("gravity", [1.0])
        assert e.fault_stats()["restarts"] == 0
