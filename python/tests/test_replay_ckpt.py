"""Replay sampling from the ring and checkpoint/restore through the binding."""
import os

import numpy as np
import pytest

import stepring


def controller(obs):
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int32)


def record(envs, steps, rng):
    """Step with random actions; return the set of (obs, action, next_obs)
    transitions that really happened, as bytes keys."""
    seen = set()
    obs, _ = envs.reset()
    obs = obs.copy()
    for _ in range(steps):
        a = rng.integers(0, 2, envs.num_envs).astype(np.int32)
        nxt, r, te, tr, _ = envs.step(a)
        for i in range(envs.num_envs):
            seen.add((obs[i].tobytes(), int(a[i]), nxt[i].tobytes()))
        obs = nxt.copy()
    return seen


def test_uniform_samples_are_real_transitions():
    rng = np.random.default_rng(0)
    with stepring.make_vec("CartPole-v1", 8, seed=4, replay_capacity=4096) as e:
        seen = record(e, 100, rng)
        with e.replay("uniform", seed=1) as rp:
            b = rp.sample(256)
            assert b["obs"].shape == (256, 4) and b["next_obs"].dtype == np.float32
            assert b["action"].shape == (256,) and b["action"].dtype == np.int32
            assert b["reward"].dtype == np.float32 and b["terminated"].dtype == np.bool_
            assert np.all(b["weight"] == 1.0) and np.all(b["discount"] > 0)
            for i in range(256):
                key = (b["obs"][i].tobytes(), int(b["action"][i]), b["next_obs"][i].tobytes())
                assert key in seen
            # next-step autoreset: the reset step is no transition, reward 1
            assert np.all(b["reward"] == 1.0)
            assert rp.inserts > 0 and rp.samples >= 256
        d = e.sample(16)  # the default sampler
        assert d["obs"].shape == (16, 4)


def test_nstep_and_prioritized():
    with stepring.make_vec("CartPole-v1", 4, seed=4, replay_capacity=1024) as e:
        obs, _ = e.reset()
        for _ in range(60):
            obs, *_ = e.step(controller(obs))
        with e.replay("uniform", n_step=3, gamma=0.5, seed=2) as rp:
            b = rp.sample(64)
            # three steps of reward 1 unless the walk stopped early
            assert np.all(np.isin(b["discount"], [0.5, 0.25, 0.125]))
            exp = {0.5: 1.0, 0.25: 1.5, 0.125: 1.75}
            assert all(abs(b["reward"][i] - exp[float(b["discount"][i])]) < 1e-6
                       for i in range(64))
        with e.replay("prioritized", alpha=1.0, beta=0.5, seed=3) as rp:
            b = rp.sample(32)
            assert rp.update(b["seq"], np.full(32, 5.0)) >= 1
            assert rp.total_priority > 0
        with e.replay("uniform", seed=1) as rp:
            s = rp.sample_sequences(4, 5)
            assert s["obs"].shape == (4, 5, 4) and s["seq"].shape == (4, 5)
            assert np.all(np.diff(s["seq"].astype(np.int64), axis=1) > 0)


def test_replay_on_empty_ring_says_try_again():
    with stepring.make_vec("CartPole-v1", 2, seed=0) as e:
        with e.replay() as rp:
            with pytest.raises(stepring.TryAgainError):
                rp.sample(4)
        with pytest.raises(ValueError):
            e.replay("sometimes")


def run(e, obs, steps):
    out = []
    for _ in range(steps):
        obs, r, te, tr, _ = e.step(controller(obs) ^ (len(out) % 3 == 0))
        out.append(np.concatenate([obs, r[:, None], te[:, None], tr[:, None]], 1).copy())
    return obs.copy(), out


def test_checkpoint_restore_resumes_exactly(tmp_path):
    path = str(tmp_path / "pool.ckpt")
    with stepring.make_vec("CartPole-v1", 6, seed=12) as e:
        obs, _ = e.reset()
        obs, _ = run(e, obs.copy(), 25)
        st = e.checkpoint(path)
        assert st["state"] == "idle" and st["bytes"] > 0 and st["count"] == 1
        _, after = run(e, obs, 40)
    info = stepring.checkpoint_info(path)
    assert info["env_id"] == "CartPole-v1" and info["num_envs"] == 6
    assert info["steps"] in (6 * 25, 6 * 26)  # the reset may count as a step
    assert info["file_size"] == os.path.getsize(path)
    assert "env_states" in [s["name"] for s in info["sections"]]
    # another env (other seed, other thread count) restored from the file
    with stepring.make_vec("CartPole-v1", 6, seed=99, num_threads=1) as f:
        f.reset()
        f.restore(path)
        _, again = run(f, obs, 40)
    assert all(np.array_equal(a, b) for a, b in zip(after, again))


def test_checkpoint_errors(tmp_path):
    path = str(tmp_path / "pool.ckpt")
    with stepring.make_vec("CartPole-v1", 4, seed=1) as e:
        e.reset()
        e.checkpoint(path, backend="sync")
        done, st = e.checkpoint_poll()
        assert done
        with pytest.raises(ValueError):
            e.checkpoint(path, backend="floppy")
        with pytest.raises(LookupError):
            e.restore(str(tmp_path / "missing.ckpt"))
    with stepring.make_vec("CartPole-v1", 5, seed=1) as g:  # other num_envs
        g.reset()
        with pytest.raises(ValueError) as ei:
            g.restore(path)
        assert "num_envs" in str(ei.value)
    sect = [s for s in stepring.checkpoint_info(path)["sections"] if s["name"] == "env_states"][0]
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[sect["offset"] + sect["length"] // 2] ^= 0x40
    bad = str(tmp_path / "bad.ckpt")
    with open(bad, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(stepring.StepringError) as ei:
        stepring.checkpoint_info(bad)
    assert ei.value.errno == 74 and "env_states" in str(ei.value)  # EBADMSG
    with stepring.make_vec("CartPole-v1", 4, seed=1) as e:
        e.reset()
        with pytest.raises(stepring.StepringError):
            e.restore(bad)
