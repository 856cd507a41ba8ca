"""Python envs in worker processes (stepring.make_vec(env_fns=...)): the
same trajectories as gymnasium.vector.SyncVectorEnv; a Python env that
raises, calls os._exit, segfaults or hangs at a chosen step gives fault
rows and a restart, and the pool keeps stepping; the restart budget; a
space the ring cannot hold; a killed trainer leaves no worker behind."""
import ctypes
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
pytest.importorskip("cloudpickle")

import stepring  # noqa: E402

from gymnasium.envs.classic_control import CartPoleEnv  # noqa: E402


class FaultyEnv(gym.Env):
    """Box((2, 3)) observations, Discrete(3) actions; action 2 fails the way
    `mode` says. A random walk from the env's own RNG; episodes of 8..39
    steps."""

    def __init__(self, mode="raise"):
        self.mode = mode
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2, 3), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = self.np_random.uniform(-1, 1, (2, 3)).astype(np.float32)
        self.len = int(self.np_random.integers(8, 40))
        self.t = 0
        return self.x.copy(), {}

    def step(self, a):
        if a == 2:
            if self.mode == "raise":
                raise ValueError("boom at step %d" % self.t)
            if self.mode == "exit":
                os._exit(7)
            if self.mode == "segv":
                ctypes.string_at(0)
            if self.mode == "hang":
                time.sleep(3600)
        self.x = self.x + self.np_random.uniform(-0.1, 0.1, (2, 3)).astype(np.float32)
        self.t += 1
        r = float("nan") if a == 2 and self.mode == "nanrew" else 1.0
        return self.x.copy(), r, self.t >= self.len, False, {}


def _fns(n, mode="raise"):
    return [lambda m=mode: FaultyEnv(m) for _ in range(n)]


@pytest.mark.parametrize("inline", [True, False])
def test_matches_sync_vector_env(inline):
    n, k = 6, 300
    ours = stepring.make_vec(env_fns=[CartPoleEnv] * n, num_workers=2, seed=5, inline=inline)
    ref = gym.vector.SyncVectorEnv([CartPoleEnv] * n)
    assert isinstance(ours, gym.vector.VectorEnv)
    o1, _ = ours.reset(seed=5)
    o2, _ = ref.reset(seed=5)
    np.testing.assert_array_equal(o1, o2)
    rng = np.random.default_rng(0)
    for _ in range(k):
        a = rng.integers(0, 2, n)
        r1 = ours.step(a)
        r2 = ref.step(a)
        for x, y in zip(r1[:4], r2[:4]):
            np.testing.assert_array_equal(x, y)
    ours.close()
    ref.close()


@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("mode", ["raise", "exit", "segv", "hang"])
def test_fault_at_chosen_step(mode, inline):
    n = 6  # worker 0: envs 0-2, worker 1: envs 3-5 (a process either way)
    kw = {"step_timeout": 0.5} if mode == "hang" else {}
    envs = stepring.make_vec(env_fns=_fns(n, mode), num_workers=2, seed=1, inline=inline, **kw)
    obs, _ = envs.reset()
    assert obs.shape == (n, 2, 3)
    pids = envs.worker_pids()
    assert (pids[0] == os.getpid()) == inline
    for t in range(40):
        a = np.zeros(n, np.int64)
        if t == 10:
            a[4] = 2
        obs, rew, term, trunc, info = envs.step(a)
        if t == 10:
            assert list(info["fault"]) == [False] * 3 + [True] * 3
            assert trunc[3:].all() and not term[3:].any()
            assert (obs[3:] == 0).all() and (rew[3:] == 0).all()
        elif t == 11:
            assert "fault" not in info
            # Restarted: a new episode, reward 0 (the reset row).
            assert (rew[3:] == 0).all() and not trunc[3:].any()
        else:
            assert "fault" not in info
    st = envs.fault_stats()
    assert st["faults"] == 1 and st["restarts"] == 1 and st["fault_rows"] == 3
    assert "envs 3-5, worker 1" in st["last"]
    want = {"raise": "ValueError: boom at step", "exit": "exited with code 7",
            "segv": "signal 11", "hang": "step timeout"}[mode]
    assert want in st["last"]
    new = envs.worker_pids()
    assert new[0] == pids[0] and new[1] != pids[1]
    envs.close()
    for p in pids + new:
        if p == os.getpid():
            continue
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)


def test_inline_slice_raises():
    """An exception in worker 0's envs, stepped in this process: the same
    fault rows, restart and reseeding as in a worker process."""
    def run(inline):
        envs = stepring.make_vec(env_fns=_fns(6), num_workers=2, seed=3, inline=inline)
        envs.reset()
        out = []
        for t in range(30):
            a = np.zeros(6, np.int64)
            if t == 7:
                a[1] = 2
            obs, rew, term, trunc, info = envs.step(a)
            if t == 7:
                assert list(info["fault"]) == [True] * 3 + [False] * 3
                assert trunc[:3].all() and (obs[:3] == 0).all()
            else:
                assert "fault" not in info
            out.append(obs)
        st = envs.fault_stats()
        assert st["faults"] == 1 and st["restarts"] == 1 and st["fault_rows"] == 3
        assert "ValueError: boom at step" in st["last"]
        assert ("envs 0-2, worker 0 (inline)" in st["last"]) == inline
        envs.close()
        return np.stack(out)

    np.testing.assert_array_equal(run(True), run(False))


def test_restart_is_deterministic():
    def run():
        envs = stepring.make_vec(env_fns=_fns(4), num_workers=2, seed=9)
        envs.reset()
        out = []
        for t in range(30):
            a = np.zeros(4, np.int64)
            if t == 5:
                a[0] = 2
            out.append(envs.step(a)[0])
        envs.close()
        return np.stack(out)

    np.testing.assert_array_equal(run(), run())


@pytest.mark.parametrize("inline", [True, False])
def test_restart_budget(inline):
    envs = stepring.make_vec(env_fns=_fns(4), num_workers=2, seed=2, max_restarts=1,
                             inline=inline)
    envs.reset()
    a = np.zeros(4, np.int64)
    a[0] = 2
    envs.step(a)
    envs.step(np.zeros(4, np.int64))
    a = np.zeros(4, np.int64)
    a[3] = 2
    with pytest.raises(stepring.StepringError) as e:
        envs.step(a)
    msg = str(e.value)
    assert "restart budget of 1" in msg and "envs 2-3, worker 1" in msg
    assert "ValueError: boom" in msg
    envs.close()


def test_unsupported_space():
    class DictObs(gym.Env):
        observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
        action_space = gym.spaces.Discrete(2)

    with pytest.raises(ValueError, match="Box observations"):
        stepring.make_vec(env_fns=[DictObs] * 2)


def test_killed_trainer_leaves_no_worker():
    code = ("import stepring, sys\n"
            "from gymnasium.envs.classic_control import CartPoleEnv\n"
            "e = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=0,\n"
            "                      inline=False)\n"
            "e.reset()\n"
            "print(*e.worker_pids(), flush=True)\n"
            "import time\n"
            "while True: e.step(e.action_space.sample())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env)
    pids = [int(x) for x in p.stdout.readline().split()]
    assert len(pids) == 2
    for q in pids:
        os.kill(q, 0)
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.time() + 5
    left = pids
    while left and time.time() < deadline:
        left = [q for q in pids if os.path.exists("/proc/%d" % q)
                and open("/proc/%d/stat" % q).read().rsplit(")", 1)[1].split()[0] != "Z"]
        time.sleep(0.05)
    assert not left


@pytest.mark.parametrize("inline", [True, False])
def test_nonfinite_rows(inline):
    """A NaN reward from a Python env (inline slice: env 1; a worker
    process: env 3) is flagged in info["nonfinite"], counted, and left out
    of mean_return."""
    envs = stepring.make_vec(env_fns=_fns(4, "nanrew"), num_workers=2, seed=0, inline=inline)
    try:
        envs.reset()
        _, rew, _, _, info = envs.step(np.array([0, 2, 0, 2]))
        assert np.isnan(rew[1]) and np.isnan(rew[3])
        assert info["nonfinite"].tolist() == [False, True, False, True]
        for _ in range(60):
            _, _, _, _, info = envs.step(np.zeros(4, np.int64))
            assert "nonfinite" not in info
        st = envs.stats()
        assert st["check_finite"] == 1 and st["nonfinite_rows"] == 2
        assert st["nonfinite_env"] in (1, 3)
        assert st["episodes"] >= 4 and np.isfinite(st["mean_return"])
        assert st["mean_return"] < st["mean_length"]  # the NaN rewards are left out
    finally:
        envs.close()
    off = stepring.make_vec(env_fns=_fns(2, "nanrew"), num_workers=1, seed=0,
                            check_finite=False)
    try:
        off.reset()
        _, rew, _, _, info = off.step(np.array([2, 0]))
        assert np.isnan(rew[0]) and "nonfinite" not in info
        assert off.stats()["nonfinite_rows"] == 0
    finally:
        off.close()


def test_gymnasium_make_vec_env_id():
    """gymnasium.make_vec("stepring/Procs-v0", env_id=...): a Gymnasium env by
    id in worker processes, the same rows as SyncVectorEnv of gymnasium.make."""
    n = 4
    ours = gym.make_vec("stepring/Procs-v0", num_envs=n, env_id="Acrobot-v1", num_workers=2,
                        seed=3)
    assert isinstance(ours, stepring.procs.ProcVectorEnv)
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("Acrobot-v1")] * n)
    o1, _ = ours.reset(seed=3)
    o2, _ = ref.reset(seed=3)
    np.testing.assert_allclose(o1, o2, rtol=0, atol=1e-6)  # float32 in the ring
    rng = np.random.default_rng(1)
    for _ in range(50):
        a = rng.integers(0, 3, n)
        r1, r2 = ours.step(a), ref.step(a)
        np.testing.assert_allclose(r1[0], r2[0], rtol=0, atol=1e-5)
        for x, y in zip(r1[1:4], r2[1:4]):
            np.testing.assert_array_equal(x, y)
    ours.close()
    ref.close()
    with pytest.raises(ValueError, match="env_id"):
        gym.make_vec("stepring/Procs-v0", num_envs=2)
    with pytest.raises(gym.error.Error):
        gym.make_vec("stepring/Procs-v0", num_envs=2, env_id="NoSuchEnv-v9")


# --- autoreset modes -----------------------------------------------------

def _env_fns(kind, n):
    from gymnasium.envs.classic_control import AcrobotEnv, PendulumEnv
    from gymnasium.wrappers import TimeLimit
    # Time limits short enough that every env ends episodes (truncated)
    # in a short test; CartPole's also end by termination.
    return {"cartpole": [CartPoleEnv] * n,
            "acrobot": [lambda: TimeLimit(AcrobotEnv(), 40)] * n,
            "pendulum": [lambda: TimeLimit(PendulumEnv(), 30)] * n}[kind]


def _actions(space, rng):
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, 1)[0]
    return rng.uniform(space.low, space.high).astype(space.dtype)


def _assert_same_step(r1, r2):
    np.testing.assert_allclose(r1[0], r2[0], rtol=0, atol=1e-6)  # float32 in the ring
    np.testing.assert_allclose(r1[1], r2[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(r1[2], r2[2])
    np.testing.assert_array_equal(r1[3], r2[3])
    i1, i2 = r1[4], r2[4]
    assert sorted(i1) == sorted(i2)
    if "final_obs" in i2:
        np.testing.assert_array_equal(i1["_final_obs"], i2["_final_obs"])
        np.testing.assert_array_equal(i1["_final_info"], i2["_final_info"])
        _assert_infos_equal(i1["final_info"], i2["final_info"])
        for i in range(len(i2["final_obs"])):
            if i2["_final_obs"][i]:
                np.testing.assert_allclose(i1["final_obs"][i], i2["final_obs"][i],
                                           rtol=0, atol=1e-6)
            else:
                assert i1["final_obs"][i] is None and i2["final_obs"][i] is None


@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("kind", ["cartpole", "acrobot", "pendulum"])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_autoreset_modes_match_sync_vector_env(mode, kind, inline):
    """Each autoreset mode against SyncVectorEnv(autoreset_mode=...) of the
    same env fns, seeds and actions, step by step: obs, rewards, flags, and
    in same_step final_obs / final_info and their masks; disabled resets
    the ended envs with options={"reset_mask": ...} on both."""
    n, k = 5, 120
    fns = _env_fns(kind, n)
    ours = stepring.make_vec(env_fns=fns, num_workers=2, seed=11, inline=inline,
                             autoreset_mode=mode)
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode[mode.upper()])
    try:
        assert isinstance(ours, gym.vector.VectorEnv)
        assert ours.metadata["autoreset_mode"] == gym.vector.AutoresetMode[mode.upper()]
        o1, _ = ours.reset(seed=11)
        o2, _ = ref.reset(seed=11)
        np.testing.assert_allclose(o1, o2, rtol=0, atol=1e-6)
        rng = np.random.default_rng(3)
        ends = resets = 0
        for _ in range(k):
            a = np.stack([_actions(ours.single_action_space, rng) for _ in range(n)])
            r1, r2 = ours.step(a), ref.step(a)
            _assert_same_step(r1, r2)
            done = r2[2] | r2[3]
            ends += int(done.sum())
            if mode == "disabled" and done.any():
                with pytest.raises(stepring.ResetNeededError):
                    ours.step(a)
                p1 = ours.reset(options={"reset_mask": done.copy()})
                p2 = ref.reset(options={"reset_mask": done.copy()})
                np.testing.assert_allclose(p1[0], p2[0], rtol=0, atol=1e-6)
                resets += 1
        assert ends >= n  # every mode saw episodes end
        assert (resets > 0) == (mode == "disabled")
    finally:
        ours.close()
        ref.close()


@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_fault_in_each_autoreset_mode(mode, inline):
    """A Python exception in env 4 (worker 1, a process) at step 10, in each
    mode: fault rows for envs 3-5 (truncated, flagged), then what the mode
    says: next_step a reset row at the next step; same_step the first obs
    of the restarted envs' next episode at once (final obs zeros); disabled
    a ResetNeededError until they are reset. The restarted envs are seeded
    from sr_proc_seed(seed, env, 1)."""
    n, seed = 6, 1
    envs = stepring.make_vec(env_fns=_fns(n), num_workers=2, seed=seed, inline=inline,
                             autoreset_mode=mode)
    lib = stepring._lib.lib

    def fresh(e):
        return FaultyEnv().reset(seed=int(lib.sr_proc_seed(seed, e, 1)))[0]

    try:
        envs.reset()
        zeros = np.zeros(n, np.int64)
        for t in range(60):
            a = zeros.copy()
            if t == 10:
                a[4] = 2
            obs, rew, term, trunc, info = envs.step(a)
            if t == 10:
                assert info["fault"].tolist() == [False] * 3 + [True] * 3
                assert trunc[3:].all() and not term[3:].any() and (rew[3:] == 0).all()
                if mode == "same_step":
                    assert info["_final_obs"][3:].all()
                    for e in range(3, 6):
                        assert (info["final_obs"][e] == 0).all()
                        np.testing.assert_array_equal(obs[e], fresh(e))
                else:
                    assert (obs[3:] == 0).all()
                if mode == "disabled":
                    with pytest.raises(stepring.ResetNeededError):
                        envs.step(zeros)
                    obs, _ = envs.reset(options={"reset_mask": term | trunc})
                    for e in range(3, 6):
                        np.testing.assert_array_equal(obs[e], fresh(e))
                continue
            assert "fault" not in info
            if t == 11:
                if mode == "next_step":
                    # the restarted envs' reset row
                    assert (rew[3:] == 0).all() and not trunc[3:].any()
                    for e in range(3, 6):
                        np.testing.assert_array_equal(obs[e], fresh(e))
                else:
                    assert (rew[3:] == 1).all()  # stepped from the fresh obs
            if mode == "disabled" and (term | trunc).any():
                envs.reset(options={"reset_mask": term | trunc})
        st = envs.fault_stats()
        assert st["faults"] == 1 and st["restarts"] == 1 and st["fault_rows"] == 3
    finally:
        envs.close()


# --- reset with seeds and options ----------------------------------------

@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("kind", ["cartpole", "pendulum"])
def test_reset_seeds_and_options_match_sync_vector_env(kind, inline):
    """reset(seed=s), reset(seed=[...]) with None entries, reset(options=...)
    (the env's own: CartPole low/high, Pendulum x_init/y_init) and
    combinations with reset_mask: the same rows as SyncVectorEnv, without
    restarting a worker."""
    n = 5
    fns = _env_fns(kind, n)
    ours = stepring.make_vec(env_fns=fns, num_workers=2, seed=2, inline=inline)
    ref = gym.vector.SyncVectorEnv(fns)
    opt = ({"low": -0.3, "high": 0.2} if kind == "cartpole" else {"x_init": 0.5, "y_init": 0.1})
    calls = [dict(seed=21), dict(seed=[4, None, 4, 9, None]), dict(options=opt),
             dict(seed=33, options=dict(opt)), dict(),
             dict(seed=[1, 2, 3, 4, 5], options={"reset_mask": np.array([1, 0, 1, 0, 1], bool)}),
             dict(seed=8, options=dict(opt, reset_mask=np.array([0, 1, 1, 0, 0], bool)))]
    try:
        pids = ours.worker_pids()
        o1, _ = ours.reset(seed=2)
        o2, _ = ref.reset(seed=2)
        rng = np.random.default_rng(5)
        for kw in calls:
            for _ in range(15):
                a = np.stack([_actions(ours.single_action_space, rng) for _ in range(n)])
                _assert_same_step(ours.step(a), ref.step(a))
            kw2 = dict(kw)
            if "options" in kw:  # SyncVectorEnv pops reset_mask from the dict
                kw2["options"] = dict(kw["options"])
            o1, i1 = ours.reset(**kw)
            o2, i2 = ref.reset(**kw2)
            np.testing.assert_allclose(o1, o2, rtol=0, atol=1e-6)
            assert i1 == i2 == {}
        assert ours.worker_pids() == pids
        assert ours.fault_stats()["restarts"] == 0
        # as SyncVectorEnv: an AssertionError (and a ValueError)
        with pytest.raises(AssertionError, match="must match num_envs=5"):
            ours.reset(seed=[1, 2])
        with pytest.raises(ValueError, match="must match num_envs=5"):
            ours.reset(seed=[1, 2])
        with pytest.raises(ValueError, match="at most"):
            ours.reset(options={"big": b"x" * 70000})
    finally:
        ours.close()
        ref.close()


# --- env infos -----------------------------------------------------------

class InfoCartPole(CartPoleEnv):
    """CartPole whose step returns an info dict every third step (an int, a
    float, a nested dict) and at each episode end (a numpy array); its
    reset returns one too."""

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed, options=options)
        self.k = 0
        return obs, {"start": float(obs[0])}

    def step(self, a):
        obs, r, te, tr, _ = super().step(a)
        self.k += 1
        info = {}
        if self.k % 3 == 0:
            info = {"k": self.k, "x": float(obs[0]), "sub": {"a": self.k * 2}}
        if te or tr:
            info["end"] = np.arange(3) + self.k
        return obs, r, te, tr, info


def _assert_infos_equal(a, b):
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for k in b:
        if k == "final_obs":
            continue
        if isinstance(b[k], dict):
            _assert_infos_equal(a[k], b[k])
        else:
            np.testing.assert_array_equal(a[k], b[k])
            assert a[k].dtype == b[k].dtype, k


@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_env_infos_match_sync_vector_env(mode, inline):
    """The info dicts envs return from step and reset reach the vector info
    as SyncVectorEnv merges them (the values, their "_key" masks, nested
    dicts, dtypes), and in same_step the ended envs' step infos are
    info["final_info"]; envs whose info is empty cost no pickling."""
    n, k = 5, 150
    fns = [InfoCartPole] * n
    ours = stepring.make_vec(env_fns=fns, num_workers=2, seed=4, inline=inline,
                             autoreset_mode=mode)
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode[mode.upper()])
    try:
        o1, i1 = ours.reset(seed=4)
        o2, i2 = ref.reset(seed=4)
        _assert_infos_equal(i1, i2)
        rng = np.random.default_rng(9)
        finals = 0
        for _ in range(k):
            a = rng.integers(0, 2, n)
            r1, r2 = ours.step(a), ref.step(a)
            _assert_same_step(r1, r2)
            _assert_infos_equal(r1[4], r2[4])
            finals += bool(r2[4].get("final_info"))
            done = r2[2] | r2[3]
            if mode == "disabled" and done.any():
                p1 = ours.reset(options={"reset_mask": done.copy()})
                p2 = ref.reset(options={"reset_mask": done.copy()})
                _assert_infos_equal(p1[1], p2[1])
        assert (finals > 0) == (mode == "same_step")
    finally:
        ours.close()
        ref.close()


def test_env_infos_too_large_warn():
    class Big(CartPoleEnv):
        def step(self, a):
            out = super().step(a)
            return out[:4] + ({"blob": np.zeros(5000)},)

    envs = stepring.make_vec(env_fns=[Big] * 4, num_workers=2, seed=0, inline=False,
                             info_bytes=4096)
    try:
        envs.reset()
        with pytest.warns(RuntimeWarning, match="info area"):
            _, _, _, _, info = envs.step(np.zeros(4, np.int64))
        assert "blob" not in info
        # the pool keeps stepping
        envs.step(np.zeros(4, np.int64))
    finally:
        envs.close()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two allowed CPUs")
@pytest.mark.parametrize("inline", [True, False])
def test_bind(inline):
    """bind='core' binds each worker process to a CPU of its own (and its
    restart too); bind_caller keeps this thread off the worker processes'
    CPUs while the pool is open and gives its CPUs back at close; with
    bind='none' or bind_caller=False this thread is left alone."""
    mine = os.sched_getaffinity(0)
    e = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=0, inline=inline)
    try:
        e.reset(seed=0)
        pids = [p for p in e.worker_pids() if p != os.getpid()]
        assert len(pids) == (1 if inline else 2)
        cpus = [os.sched_getaffinity(p) for p in pids]
        assert all(len(c) == 1 for c in cpus)
        assert len(set().union(*cpus)) == len(cpus)  # each its own
        taken = set().union(*cpus)
        if mine - taken:
            assert os.sched_getaffinity(0) == mine - taken
        os.kill(pids[-1], signal.SIGKILL)
        for _ in range(50):
            e.step(np.zeros(4, np.int64))
            if e.fault_stats()["restarts"]:
                break
        assert e.fault_stats()["restarts"] == 1
        new = [p for p in e.worker_pids() if p != os.getpid()][-1]
        assert new != pids[-1] and os.sched_getaffinity(new) == cpus[-1]
    finally:
        e.close()
    assert os.sched_getaffinity(0) == mine
    for kw in ({"bind": "none"}, {"bind_caller": False}):
        e = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=0, **kw)
        try:
            assert os.sched_getaffinity(0) == mine
            if kw.get("bind") == "none":
                assert all(os.sched_getaffinity(p) == mine for p in e.worker_pids())
        finally:
            e.close()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two allowed CPUs")
def test_bind_several_pools():
    """Pools open at once on one thread (a training and an evaluation pool,
    a pool restored beside another): each is created as if the thread had
    its own CPUs (a second 2-worker pool on 2 CPUs does not find only the
    one an earlier pool left it), the thread stays off every open pool's
    worker CPUs, gets its CPUs back only when the last pool closes, and a
    set the user gives it meanwhile is never overwritten."""
    mine = os.sched_getaffinity(0)
    a = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=0)
    b = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=1)
    t = stepring.make_vec("CartPole-v1", num_envs=4, num_threads=2, seed=0)
    try:
        taken = set()
        for e in (a, b):
            e.reset(seed=0)
            taken |= set().union(*(os.sched_getaffinity(p) for p in e.worker_pids()
                                   if p != os.getpid()))
        t.reset(seed=0)
        left = mine - taken
        assert os.sched_getaffinity(0) == (left if left else mine)
        a.close()
        assert os.sched_getaffinity(0) == (left if left else mine)  # b is still open
    finally:
        for e in (a, b, t):
            e.close()
    assert os.sched_getaffinity(0) == mine
    # The user's own choice while a pool is open stays theirs.
    c = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=0)
    try:
        os.sched_setaffinity(0, mine)
        d = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=0)
        d.close()
    finally:
        c.close()
    assert os.sched_getaffinity(0) == mine
