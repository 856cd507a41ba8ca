"""Hostile use of the binding: copies and pickles, close and GC from other
threads, two threads on one env, views outliving their env, integers that
would wrap around in a C field. Each must end in a clear exception, never a
crash, a hang or a silent wrong answer."""
import copy
import gc
import pickle
import threading
import time
import weakref

import numpy as np
import pytest

import stepring

SLOW = "spin:cost_us=3000"  # 8 envs on one thread: about 24 ms a step


def test_deepcopy_and_pickle_are_a_type_error():
    e = stepring.make_vec("CartPole-v1", 4, seed=0)
    e.reset()
    for f in (copy.deepcopy, copy.copy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            f(e)
    with pytest.raises(TypeError):
        copy.deepcopy(e._handle)
    # the env is intact and still steps; closing frees it once
    obs, r, te, tr, _ = e.step(np.zeros(4, np.int32))
    assert obs.shape == (4, 4) and r.dtype == np.float64
    e.close()
    e.close()


def run_in_thread(fn):
    out = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as x:  # noqa: BLE001 - reported to the test
            out["error"] = x
    t = threading.Thread(target=body)
    t.start()
    return t, out


def test_close_from_another_thread_while_step_runs_is_refused():
    e = stepring.make_vec(SLOW, 8, num_threads=1, seed=0)
    e.reset()
    stop = time.monotonic() + 0.6

    def stepper():
        n = 0
        while time.monotonic() < stop:
            e.step(np.zeros(8, np.int32))
            n += 1
        return n
    t, out = run_in_thread(stepper)
    refused = 0
    while t.is_alive():
        try:
            e.close()
        except stepring.BusyError as x:
            refused += 1
            assert "another thread" in str(x)
        if e.closed:
            break
        time.sleep(0.002)
    t.join(10)
    assert not t.is_alive()
    # Either every close came while a step was running (refused), or one
    # slipped in between two steps: then the stepper saw a closed env.
    if "error" in out:
        assert isinstance(out["error"], RuntimeError) and "closed" in str(out["error"])
    else:
        assert out["value"] > 0
    assert refused > 0
    e.close()
    assert e.closed


def test_two_threads_stepping_one_env_get_busy_not_deadlock():
    e = stepring.make_vec(SLOW, 8, num_threads=1, seed=0)
    e.reset()
    errors = []

    def stepper():
        busy = ok = 0
        for _ in range(15):
            try:
                e.step(np.zeros(8, np.int32))
                ok += 1
            except stepring.BusyError:
                busy += 1
                time.sleep(0.001)
        return ok, busy
    threads = [run_in_thread(stepper) for _ in range(2)]
    for t, out in threads:
        t.join(30)
        assert not t.is_alive(), "deadlock"
        if "error" in out:
            errors.append(out["error"])
    assert not errors, errors
    results = [out["value"] for _, out in threads]
    assert sum(ok for ok, _ in results) > 0
    assert sum(busy for _, busy in results) > 0  # the overlap was noticed
    # steps counted by the pool: exactly the ones that were made
    assert e.stats()["steps"] == 8 * (1 + sum(ok for ok, _ in results))
    e.close()


def test_gc_of_the_env_while_another_thread_steps():
    e = stepring.make_vec(SLOW, 8, num_threads=1, seed=0)
    e.reset()
    ref = weakref.ref(e)
    go = threading.Event()

    def stepper(env):
        go.set()
        for _ in range(5):
            env.step(np.zeros(8, np.int32))
        return True
    t, out = run_in_thread(lambda: stepper(e))
    go.wait(5)
    del e  # the running call keeps it alive
    gc.collect()
    t.join(30)
    assert out.get("value") is True, out
    del t, out
    gc.collect()
    assert ref() is None  # collected (its pool freed) once the call returned


def test_views_and_copies_outlive_the_env():
    e = stepring.make_vec("CartPole-v1", 8, seed=4, copy=False)
    obs, _ = e.reset()
    obs, r, te, tr, _ = e.step(np.ones(8, np.int32))
    assert not obs.flags.writeable and r.dtype == np.float32
    c = stepring.make_vec("CartPole-v1", 8, seed=4)
    c.reset()
    mine, rm, _, _, _ = c.step(np.ones(8, np.int32))
    np.testing.assert_array_equal(mine, obs)
    mine *= 2  # copies are the caller's: writable
    e.close()
    c.close()
    del e, c
    gc.collect()
    # the pool lives on while a view does: readable, same values
    assert np.isfinite(obs).all() and np.array_equal(mine, obs * 2)
    assert r.sum() == 8.0 and rm.sum() == 8.0
    del obs, r, te, tr
    gc.collect()


BIG = [
    ("seed", dict(seed=2**64)),
    ("seed", dict(seed=2**70)),
    ("replay_capacity", dict(replay_capacity=2**64 + 1024)),
    ("num_threads", dict(num_threads=2**32 + 1)),
    ("max_episode_steps", dict(max_episode_steps=2**32 + 5)),
]


@pytest.mark.parametrize("name,kw", BIG, ids=[k for k, _ in BIG])
def test_integers_beyond_their_c_field_are_refused(name, kw):
    with pytest.raises(stepring.OutOfRangeError) as ei:
        stepring.make_vec("CartPole-v1", 4, **kw)
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, OverflowError)
    assert name in str(ei.value)


def test_num_envs_and_seeds_never_wrap():
    for n in (2**32 + 4, 2**32, 2**31):
        with pytest.raises(OverflowError) as ei:
            stepring.make_vec("CartPole-v1", n)
        assert "must be > 0" not in str(ei.value) and str(n) in str(ei.value)
    with pytest.raises(ValueError):
        stepring.make_vec("CartPole-v1", 4, seed=-1)
    with pytest.raises(ValueError):
        stepring.make_vec("CartPole-v1", 4, seed=1.5)
    with pytest.raises(ValueError):
        stepring.make_vec("CartPole-v1", True)
    with pytest.raises(OverflowError):
        stepring.make_vec("CartPole-v1", 4, mode="async", batch_size=2**32 + 1)
    with stepring.make_vec("CartPole-v1", 4, seed=2**64 - 1) as e:  # the largest is fine
        e.reset()
        with pytest.raises(OverflowError):
            e.reset(seed=2**64)
        with pytest.raises(OverflowError):
            e.reset(seed=[0, 1, 2, 2**64])
        with pytest.raises(stepring.InvalidArgumentError):
            e.step(np.array([0, 1, 2**32, 0]))  # not int32: refused, not wrapped
        with pytest.raises(OverflowError):
            e.replay(seed=2**64)
    with stepring.make_vec("CartPole-v1", 4, mode="async", batch_size=2) as a:
        a.reset()
        with pytest.raises(ValueError):
            a.send(np.zeros(1, np.int32), env_id=np.array([2**32 + 1]))
