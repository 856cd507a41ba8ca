"""The VectorEnv over the C pool: Gymnasium conventions, dtypes, seeding,
zero copy, autoreset modes, async bookkeeping, errors."""
import math

import numpy as np
import pytest

import stepring
from stepring.vector import _gym

if _gym is not None:  # the spaces are Gymnasium's own when it is importable
    from gymnasium.spaces import Box, Discrete, MultiDiscrete
else:
    from stepring.spaces import Box, Discrete, MultiDiscrete

THETA_LIMIT = 12 * 2 * math.pi / 360


def controller(obs):
    """A deterministic policy that balances CartPole for its 500 steps."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int32)


def rollout(envs, steps, policy=controller):
    obs, _ = envs.reset()
    out = [obs.copy()]
    for _ in range(steps):
        obs, r, te, tr, _ = envs.step(policy(obs))
        out.append(np.concatenate([obs, r[:, None], te[:, None], tr[:, None]], 1).copy())
    return out


def test_library_and_env_list():
    assert stepring.version().count(".") == 2
    assert "CartPole-v1" in stepring.list_envs()
    assert stepring.library_path.endswith(".so") or "stepring" in stepring.library_path


def test_spaces_and_shapes(cartpole):
    e = cartpole
    assert e.num_envs == 8 and e.batch_size == 8
    so, sa = e.single_observation_space, e.single_action_space
    assert isinstance(so, Box) and so.shape == (4,) and so.dtype == np.float32
    assert so.high[0] == np.float32(4.8) and so.high[1] == np.inf
    assert isinstance(sa, Discrete) and sa.n == 2
    assert e.observation_space.shape == (8, 4) and e.observation_space.dtype == np.float32
    assert isinstance(e.action_space, MultiDiscrete) and e.action_space.shape == (8,)
    assert e.spec.id == "CartPole-v1" and e.spec.max_episode_steps == 500
    assert e.metadata["autoreset_mode"] == (_gym.vector.AutoresetMode.NEXT_STEP if _gym
                                            else "next_step")

    obs, info = e.reset()
    assert isinstance(info, dict)
    assert obs.shape == (8, 4) and obs.dtype == np.float32
    assert np.all(np.abs(obs) <= 0.05)  # CartPole's reset distribution
    assert e.observation_space.contains(obs)
    obs, r, te, tr, info = e.step(e.action_space.sample())
    assert obs.shape == (8, 4) and obs.dtype == np.float32
    assert r.shape == (8,) and r.dtype == np.float64 and np.all(r == 1.0)  # as Gymnasium
    assert te.shape == (8,) and te.dtype == np.bool_
    assert tr.shape == (8,) and tr.dtype == np.bool_
    assert isinstance(info, dict) and "env_id" not in info


def test_step_accepts_lists_int64_and_torch(cartpole):
    import torch
    cartpole.reset(seed=5)
    cartpole.step([0, 1] * 4)
    cartpole.step(np.ones(8, dtype=np.int64))
    cartpole.step(torch.zeros(8, dtype=torch.long))
    cartpole.step(np.zeros((8, 1), dtype=np.int32))


def test_seeding_is_deterministic():
    a = stepring.make_vec("CartPole-v1", 6, seed=42, num_threads=1)
    b = stepring.make_vec("CartPole-v1", 6, seed=42, num_threads=2)
    c = stepring.make_vec("CartPole-v1", 6, seed=43, num_threads=1)
    with a, b, c:
        ra, rb, rc = rollout(a, 60), rollout(b, 60), rollout(c, 60)
    # same seed: the same trajectories whatever the number of threads
    assert all(np.array_equal(x, y) for x, y in zip(ra, rb))
    # another seed: other initial states
    assert not np.array_equal(ra[0], rc[0])


def test_reset_seed_reseeds_like_a_fresh_env():
    with stepring.make_vec("CartPole-v1", 4, seed=7) as fresh:
        ref = rollout(fresh, 30)
    with stepring.make_vec("CartPole-v1", 4, seed=1) as e:
        rollout(e, 10)  # advance the instance RNGs
        obs, _ = e.reset(seed=7)
        assert np.array_equal(obs, ref[0])
        for want in ref[1:]:
            obs, r, te, tr, _ = e.step(controller(obs))
            got = np.concatenate([obs, r[:, None], te[:, None], tr[:, None]], 1)
            assert np.array_equal(got, want)
        # reset() without a seed continues the RNG: new initial states
        obs2, _ = e.reset()
        assert not np.array_equal(obs2, ref[0])


def test_outputs_are_views_of_the_ring():
    cartpole = stepring.make_vec("CartPole-v1", 8, seed=3, num_threads=2, copy=False)
    base, length = cartpole.ring_memory()
    assert base and length > 0

    def inside(a):
        p = a.__array_interface__["data"][0]
        return base <= p and p + a.nbytes <= base + length

    obs, _ = cartpole.reset()
    assert not obs.flags.owndata and inside(obs)
    for _ in range(5):
        obs, r, te, tr, _ = cartpole.step(np.zeros(8, np.int32))
        for a in (obs, r, te, tr):
            assert not a.flags.owndata and inside(a) and not a.flags.writeable
        assert r.dtype == np.float32  # the ring's column
    assert obs.flags.c_contiguous
    cartpole.close()


def test_torch_output_is_zero_copy():
    import torch
    with stepring.make_vec("CartPole-v1", 4, seed=0, output="torch", copy=False) as e:
        base, length = e.ring_memory()
        obs, info = e.reset()
        assert isinstance(obs, torch.Tensor) and obs.dtype == torch.float32
        assert obs.shape == (4, 4)
        obs, r, te, tr, _ = e.step(torch.ones(4, dtype=torch.int32))
        assert r.dtype == torch.float32 and te.dtype == torch.bool and tr.dtype == torch.bool
        for t in (obs, r, te, tr):
            assert base <= t.data_ptr() < base + length


def run_until_done(e, policy=lambda o: np.zeros(len(o), np.int32), limit=600):
    obs, _ = e.reset()
    for _ in range(limit):
        prev = obs.copy()
        obs, r, te, tr, info = e.step(policy(obs))
        if (te | tr).any():
            return prev, obs, r, te, tr, info
    raise AssertionError("no episode ended")


def test_next_step_autoreset():
    with stepring.make_vec("CartPole-v1", 4, seed=11) as e:
        _, obs, r, te, tr, _ = run_until_done(e)
        done = te | tr
        # the terminal obs is out of bounds
        term_obs = obs[done].copy()
        assert np.all((np.abs(term_obs[:, 0]) > 2.4) | (np.abs(term_obs[:, 2]) > THETA_LIMIT))
        # the next step resets those envs: reset obs, reward 0, not done
        obs, r, te, tr, _ = e.step(np.zeros(4, np.int32))
        assert np.all(np.abs(obs[done]) <= 0.05)
        assert np.all(r[done] == 0.0)
        assert not te[done].any() and not tr[done].any()


def test_same_step_autoreset_final_obs():
    with stepring.make_vec("CartPole-v1", 4, seed=11, autoreset_mode="same_step") as e:
        assert e.metadata["autoreset_mode"] == (_gym.vector.AutoresetMode.SAME_STEP if _gym
                                                else "same_step")
        obs, _ = e.reset()
        obs, _, _, _, info = e.step(np.zeros(4, np.int32))
        assert info == {}  # as SyncVectorEnv: final_* keys only on steps where an env ended
        _, obs, r, te, tr, info = run_until_done(e)
        done = te | tr
        assert set(info) == {"final_obs", "_final_obs", "final_info", "_final_info"}
        assert np.array_equal(info["_final_obs"], done)
        assert np.array_equal(info["_final_info"], done) and info["final_info"] == {}
        assert info["final_obs"].dtype == object and info["final_obs"].shape == (4,)
        assert all((x is None) == (not d) for x, d in zip(info["final_obs"], done))
        final = np.stack(info["final_obs"][done])
        assert np.all((np.abs(final[:, 0]) > 2.4) | (np.abs(final[:, 2]) > THETA_LIMIT))
        # the returned obs is already the next episode's first obs
        assert np.all(np.abs(obs[done]) <= 0.05)
        assert np.all(r[done] == 1.0)


def test_time_limit_truncates_at_500():
    with stepring.make_vec("CartPole-v1", 3, seed=0) as e:
        obs, _ = e.reset()
        for t in range(1, 501):
            obs, r, te, tr, _ = e.step(controller(obs))
            if t < 500:
                assert not te.any() and not tr.any(), "controller fell at step %d" % t
        assert tr.all() and not te.any()


def test_disabled_autoreset_and_reset_mask():
    with stepring.make_vec("CartPole-v1", 4, seed=2, autoreset_mode="disabled") as e:
        _, obs, r, te, tr, _ = run_until_done(e)
        done = (te | tr).copy()
        obs, _ = e.reset(options={"reset_mask": done})
        assert np.all(np.abs(obs[done]) <= 0.05)
        with pytest.raises(ValueError):
            e.reset(options={"reset_mask": np.ones(3, bool)})


def test_async_env_id_bookkeeping():
    n, b = 8, 2
    with stepring.make_vec("CartPole-v1", n, mode="async", batch_size=b, seed=5) as e:
        assert e.batch_size == b and e.observation_space.shape == (b, 4)
        assert e.action_space.shape == (b,)
        obs, info = e.reset()
        ids = info["env_id"].copy()
        assert obs.shape == (b, 4) and ids.shape == (b,) and ids.dtype == np.uint32
        batches = [ids]
        # without sends, the next recvs return the other envs, each once
        for _ in range(n // b - 1):
            _, _, _, _, info = e.recv()
            batches.append(info["env_id"].copy())
        allids = np.concatenate(batches)
        assert sorted(allids.tolist()) == list(range(n))
        # send to one batch's envs only: recv returns exactly those
        e.send(np.zeros(b, np.int32), env_id=batches[2])
        _, r, _, _, info = e.recv()
        assert sorted(info["env_id"].tolist()) == sorted(batches[2].tolist())
        assert np.all(r == 1.0)
        # send to every env, then step in the default way (send to the
        # envs of the last batch): no env twice in a batch, all get stepped
        others = np.array([i for i in range(n) if i not in set(batches[2].tolist())])
        e.send(np.zeros(n - b, np.int32), env_id=others)
        e.send(np.zeros(b, np.int32), env_id=batches[2])
        counts = np.zeros(n, int)
        obs, _, _, _, info = e.recv()
        # Which envs come first depends on the scheduler (worker 0 steps
        # inline in recv; others wake up when the OS lets them): loop until
        # every env was returned a few times, without a bound on fairness.
        for _ in range(20000):
            ids = info["env_id"]
            assert len(set(ids.tolist())) == b
            counts[ids] += 1
            if counts.min() >= 3:
                break
            obs, r, te, tr, info = e.step(controller(obs))
            assert obs.shape == (b, 4) and r.shape == (b,) and info["env_id"].shape == (b,)
        assert counts.min() >= 3, counts


def test_async_batch_groups(monkeypatch):
    """batch_size divides num_envs: reset() then step() cycle through the
    fixed groups in order (each a run of every worker's envs), every batch a
    view of the ring; sending other envs still works (per-env queues)."""
    n, b = 16, 4
    with stepring.make_vec("CartPole-v1", n, mode="async", batch_size=b, num_threads=2,
                           seed=3, bind="none", copy=False) as e:
        assert e.batch_groups == n // b
        base, length = e.ring_memory()
        ws = e.worker_stats()
        m = [w["num_envs"] // (n // b) for w in ws]
        groups = [np.concatenate([w["first_env"] + g * mw + np.arange(mw)
                                  for w, mw in zip(ws, m)]) for g in range(n // b)]
        obs, info = e.reset()
        for k in range(3 * (n // b)):
            assert info["env_id"].tolist() == groups[k % (n // b)].tolist()
            p = obs.__array_interface__["data"][0]
            assert base <= p and p + obs.nbytes <= base + length
            obs, _, _, _, info = e.step(np.zeros(b, np.int32))
        # part of a batch: per-env queues from here, each env once per send
        last = info["env_id"].copy()
        e.send(np.ones(2, np.int32), env_id=last[:2])
        e.send(np.ones(2, np.int32), env_id=last[2:])
        seen = []
        for _ in range(n // b):
            _, r, _, _, info = e.recv()
            seen += info["env_id"].tolist()
        assert sorted(seen) == list(range(n))
    with stepring.make_vec("CartPole-v1", 10, mode="async", batch_size=4) as e:
        assert e.batch_groups == 0  # 4 does not divide 10: per-env queues
    monkeypatch.setenv("STEPRING_POOL_KNOBS", "no-batch-groups,no-rebalance")
    with stepring.make_vec("CartPole-v1", 8, mode="async", batch_size=4) as e:
        monkeypatch.delenv("STEPRING_POOL_KNOBS")
        assert e.batch_groups == 0  # asked not to (docs/tuning.md)
        _, info = e.reset()
        seen = info["env_id"].tolist()
        _, _, _, _, info = e.recv()
        assert sorted(seen + info["env_id"].tolist()) == list(range(8))
    with stepring.make_vec("CartPole-v1", 8) as e:
        assert e.batch_groups == 0  # sync


def test_async_send_recv_explicit_ids():
    with stepring.make_vec("CartPole-v1", 4, mode="async", batch_size=2, seed=5) as e:
        obs, info = e.reset()
        first = info["env_id"].copy()
        # recv the remaining two envs that reset made ready
        obs2, _, _, _, info2 = e.recv()
        assert set(first.tolist()) | set(info2["env_id"].tolist()) == {0, 1, 2, 3}
        e.send(np.zeros(4, np.int32), env_id=np.arange(4))
        seen = []
        for _ in range(2):
            _, r, _, _, info = e.recv()
            assert np.all(r == 1.0)
            seen += info["env_id"].tolist()
        assert sorted(seen) == [0, 1, 2, 3]
        with pytest.raises(RuntimeError):
            stepring.make_vec("CartPole-v1", 2).send([0, 0])


def test_async_trajectories_match_sync():
    """In async mode an env's trajectory depends only on its own actions: with
    a deterministic policy each env follows its sync trajectory."""
    n, steps = 6, 40
    with stepring.make_vec("CartPole-v1", n, seed=9) as s:
        obs, _ = s.reset()
        sync = [[obs[i].copy()] for i in range(n)]
        for _ in range(steps):
            obs, _, _, _, _ = s.step(controller(obs))
            for i in range(n):
                sync[i].append(obs[i].copy())
    for threads in (1, 2):
        with stepring.make_vec("CartPole-v1", n, mode="async", batch_size=2, seed=9,
                               num_threads=threads) as a:
            obs, info = a.reset()
            got = [[] for _ in range(n)]
            # Which envs are returned first is up to the scheduler: step
            # until every env has its steps + 1 observations.
            for _ in range(50000):
                for row, i in enumerate(info["env_id"]):
                    got[i].append(obs[row].copy())
                if min(len(g) for g in got) > steps:
                    break
                obs, _, _, _, info = a.step(controller(obs))
        for i in range(n):
            assert len(got[i]) > steps
            assert np.array_equal(np.array(got[i][:steps + 1]), np.array(sync[i]))


def test_errors_carry_the_c_message():
    with pytest.raises(LookupError) as ei:
        stepring.make_vec("NoSuchEnv-v9", 2)
    assert isinstance(ei.value, stepring.UnknownEnvError)
    assert "NoSuchEnv-v9" in str(ei.value) and "CartPole-v1" in str(ei.value)
    assert ei.value.errno == 2
    with pytest.raises(ValueError):
        stepring.make_vec("CartPole-v1", 0)
    with pytest.raises(ValueError):
        stepring.make_vec("CartPole-v1", 4, mode="async", batch_size=4)
    with pytest.raises(ValueError):
        stepring.make_vec("CartPole-v1", 4, autoreset_mode="sometimes")
    # rejected by the C library: the message is the C one
    with pytest.raises(ValueError) as ei:
        stepring.make_vec("CartPole-v1", 4, replay_capacity=1000)  # not a power of two
    assert isinstance(ei.value, stepring.InvalidArgumentError) and str(ei.value)


def test_bad_actions_raise_and_step_nothing():
    with stepring.make_vec("CartPole-v1", 4, seed=8) as ref, \
            stepring.make_vec("CartPole-v1", 4, seed=8) as e:
        ref.reset()
        e.reset()
        a = np.array([0, 1, 1, 0], np.int32)
        with pytest.raises(ValueError, match="NaN"):
            e.step(np.array([0.0, np.nan, 1.0, 0.0]))
        with pytest.raises(ValueError) as ei:
            e.step(np.array([0, 1, 2, 0], np.int32))  # out of range: the C check
        assert isinstance(ei.value, stepring.InvalidArgumentError)
        assert str(ei.value)  # sr_last_error() text
        with pytest.raises(ValueError):
            e.step(np.zeros(3, np.int32))
        with pytest.raises(ValueError):
            e.step(np.array([-1, 0, 0, 0], np.int32))
        # nothing was stepped: both envs still agree
        o1, r1, _, _, _ = ref.step(a)
        o2, r2, _, _, _ = e.step(a)
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2)
        assert e.stats()["steps"] == ref.stats()["steps"]


def test_close_and_context_manager():
    e = stepring.make_vec("CartPole-v1", 2, seed=0)
    obs, _ = e.reset()
    with e:
        e.step(np.zeros(2, np.int32))
    assert e.closed
    e.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        e.step(np.zeros(2, np.int32))
    # a view taken before close stays readable (the pool is freed after it)
    assert obs.shape == (2, 4) and np.isfinite(obs).all()
    del obs


def test_stats_count_steps(cartpole):
    cartpole.reset()
    for _ in range(10):
        cartpole.step(np.zeros(8, np.int32))
    s = cartpole.stats()
    assert s["steps"] >= 80
    assert s["episodes"] >= 1  # action 0 forever ends episodes in ~10 steps
    ws = cartpole.worker_stats()
    assert len(ws) == cartpole.num_threads
    assert sum(w["steps"] for w in ws) == s["steps"]
    assert sum(w["num_envs"] for w in ws) == 8
    assert sum(w["rows"] for w in ws) == 8
    assert [w["first_env"] for w in ws] == sorted(w["first_env"] for w in ws)


def test_rebalance_knob(monkeypatch):
    """The no-rebalance knob (docs/tuning.md): in sync mode every worker
    steps exactly its slice (rows == num_envs); the default may move rows
    between neighbours, and the results are the same either way."""
    kw = dict(num_threads=2, seed=4, bind="none")
    a = stepring.make_vec("CartPole-v1", 64, **kw)
    monkeypatch.setenv("STEPRING_POOL_KNOBS", "no-rebalance")
    b = stepring.make_vec("CartPole-v1", 64, **kw)
    monkeypatch.delenv("STEPRING_POOL_KNOBS")
    with a, b:
        oa, _ = a.reset()
        ob, _ = b.reset()
        for k in range(200):
            act = (np.arange(64) + k) % 2
            oa, ra, ta, ua, _ = a.step(act.astype(np.int32))
            ob, rb, tb, ub, _ = b.step(act.astype(np.int32))
            assert np.array_equal(oa, ob) and np.array_equal(ra, rb)
            assert np.array_equal(ta, tb) and np.array_equal(ua, ub)
        assert sum(w["rows"] for w in a.worker_stats()) == 64
        assert [w["rows"] for w in b.worker_stats()] == [w["num_envs"] for w in b.worker_stats()]


def test_dlpack_output_through_the_device_api():
    import torch
    with stepring.make_vec("CartPole-v1", 4, seed=6, output="dlpack") as d, \
            stepring.make_vec("CartPole-v1", 4, seed=6) as ref:
        o1, _ = d.reset()
        o2, _ = ref.reset()
        assert isinstance(o1, torch.Tensor) and o1.device.type == "cpu"
        assert o1.dtype == torch.float32 and o1.shape == (4, 4)
        assert np.array_equal(o1.numpy(), o2)
        for _ in range(20):
            a = controller(o2)
            o1, r1, te1, tr1, _ = d.step(a)
            o2, r2, te2, tr2, _ = ref.step(a)
            assert np.array_equal(o1.numpy(), o2) and np.array_equal(r1.numpy(), r2)
            assert te1.dtype == torch.bool and np.array_equal(te1.numpy(), te2)
        # tensors kept alive pin their device batch: with all of them held
        # a step raises instead of blocking
        held = [d.step(controller(o2))[0] for _ in range(7)]
        with pytest.raises(stepring.TryAgainError):
            for _ in range(4):
                held.append(d.step(controller(o2))[0])
        del held
        d.step(controller(o2))  # released: steps again


def test_cuda_without_a_gpu_is_a_clear_error():
    import torch
    if torch.cuda.is_available():
        with stepring.make_vec("CartPole-v1", 4, seed=0, device="cuda") as e:
            obs, _ = e.reset()
            assert obs.is_cuda
            obs, r, te, tr, _ = e.step(torch.zeros(4, dtype=torch.int32))
            assert obs.is_cuda and r.is_cuda
        return
    with pytest.raises(stepring.UnsupportedError) as ei:
        stepring.make_vec("CartPole-v1", 4, device="cuda")
    assert isinstance(ei.value, NotImplementedError)
    assert "device" in str(ei.value) and len(str(ei.value)) > 10


def test_box_actions_pendulum():
    with stepring.make_vec("Pendulum-v1", 4, seed=1) as e, \
            stepring.make_vec("Pendulum-v1", 4, seed=1) as ref:
        sa = e.single_action_space
        assert isinstance(sa, Box) and sa.shape == (1,) and sa.dtype == np.float32
        assert sa.low[0] == -2.0 and sa.high[0] == 2.0
        assert e.action_space.shape == (4, 1)
        assert e.single_observation_space.shape == (3,)
        e.reset()
        ref.reset()
        a = e.action_space.sample()
        assert a.shape == (4, 1) and a.dtype == np.float32
        o1, r1, _, _, _ = e.step(a)
        o2, r2, _, _, _ = ref.step(a.astype(np.float64))  # converted to float32
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2)
        assert r1.dtype == np.float64 and np.all(r1 <= 0)
        bad = a.copy()
        bad[2, 0] = np.nan
        with pytest.raises(ValueError) as ei:
            e.step(bad)  # refused by sr_pool_step: nothing stepped
        assert str(ei.value)
        with pytest.raises(ValueError):
            e.step(np.zeros((4, 2), np.float32))
        o1, *_ = e.step(a)
        o2, *_ = ref.step(a)
        assert np.array_equal(o1, o2)


def test_worker_cpus():
    import os
    allowed = os.sched_getaffinity(0)
    with stepring.make_vec("CartPole-v1", 4, seed=1, num_threads=min(2, len(allowed))) as v:
        cpus = v.worker_cpus()
        assert len(cpus) == v.num_threads
        assert cpus[0] is None  # worker 0 is this thread, which the pool does not bind
        for c in cpus[1:]:
            assert c in allowed
    with stepring.make_vec("CartPole-v1", 4, seed=1, num_threads=min(2, len(allowed)),
                           bind="none") as v:
        assert v.worker_cpus() == [None] * v.num_threads


def test_default_threads_come_from_the_work():
    """num_threads=None is the C default: a few cheap envs on the calling
    thread (no wake-ups), and the env says why."""
    with stepring.make_vec("CartPole-v1", 4) as e:
        assert e.num_threads == 1
        assert e.threads_note.startswith("1 (default: 4 envs x ")
    with stepring.make_vec("CartPole-v1", 4, num_threads=1) as e:
        assert e.threads_note == "1 (asked for)"
