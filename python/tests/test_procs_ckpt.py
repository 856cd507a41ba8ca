"""Checkpoints of Python process pools (stepring.make_vec(env_fns=...)):
each worker pickles its envs (np_random included) into shared memory; a
pool restored from the file, with another worker count, inline or not, in
this process or another, continues exactly as the pool that was not
interrupted (Gymnasium's CartPoleEnv and AcrobotEnv, and CartPole-v1
through gymnasium.make with its wrappers, in each autoreset mode). An env
that cannot be pickled is named in the error; nothing is written and the
pool steps on."""
import hashlib
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
pytest.importorskip("cloudpickle")

import stepring  # noqa: E402

from gymnasium.envs.classic_control import AcrobotEnv, CartPoleEnv  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _acts(space, n, k, m):
    rng = np.random.default_rng(1000 + k)
    return [rng.integers(0, space.n, n) for _ in range(m)]


def _run(env, acts):
    out = []
    for a in acts:
        obs, rew, term, trunc, info = env.step(a)
        out.append((obs.copy(), rew.copy(), term.copy(), trunc.copy()))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b)):
        for u, v in zip(x, y):
            assert np.array_equal(u, v), "step %d after the restore differs" % t


def _stats(env):
    s = env.stats()
    return s["steps"], s["episodes"], s["mean_return"], s["mean_length"]


@pytest.mark.parametrize("fn,mode", [
    (CartPoleEnv, "next_step"),
    (AcrobotEnv, "next_step"),
    (lambda: gym.make("CartPole-v1"), "next_step"),
    (CartPoleEnv, "same_step"),
])
@pytest.mark.parametrize("inline_a,workers_b,inline_b", [
    (True, 1, False), (False, 2, True)])
def test_resume_exact(tmp_path, fn, mode, inline_a, workers_b, inline_b):
    n, k, m = 12, 60, 150
    path = str(tmp_path / "p.ckpt")
    a = stepring.make_vec(env_fns=[fn] * n, num_workers=2, seed=3, inline=inline_a,
                          autoreset_mode=mode)
    a.reset()
    acts = _acts(a.single_action_space, n, 0, k + m)
    _run(a, acts[:k])
    st = a.checkpoint(path, backend="sync")
    assert st["bytes"] > 0
    want = _run(a, acts[k:])

    b = stepring.make_vec(env_fns=[fn] * n, num_workers=workers_b, seed=99,
                          inline=inline_b, autoreset_mode=mode)
    b.reset()
    _run(b, _acts(b.single_action_space, n, 7, 9))  # elsewhere entirely
    b.restore(path)
    _same(want, _run(b, acts[k:]))
    assert _stats(a) == _stats(b)
    if fn is not AcrobotEnv:  # (Acrobot rarely ends under random actions)
        assert _stats(a)[1] > 0  # episodes ended (and reset) after the restore
    a.close()
    b.close()


# A restore in another process, from a file written by this one.
_CHILD = r"""
import hashlib, sys
import numpy as np
import stepring
from gymnasium.envs.classic_control import AcrobotEnv
path, n, k, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
env = stepring.make_vec(env_fns=[AcrobotEnv] * n, num_workers=2, seed=5, inline=False)
env.restore(path)
h = hashlib.sha256()
for t in range(k, k + m):
    a = np.random.default_rng(1000 + t).integers(0, 3, n)
    o, r, te, tr, _ = env.step(a)
    for x in (o, r, te, tr):
        h.update(np.ascontiguousarray(x).tobytes())
print(h.hexdigest())
env.close()
"""


def test_resume_other_process(tmp_path):
    n, k, m = 8, 40, 120
    path = str(tmp_path / "a.ckpt")
    a = stepring.make_vec(env_fns=[AcrobotEnv] * n, num_workers=2, seed=5)
    a.reset()
    for t in range(k):
        a.step(np.random.default_rng(1000 + t).integers(0, 3, n))
    a.checkpoint(path)  # in the background, waited for
    h = hashlib.sha256()
    for t in range(k, k + m):
        o, r, te, tr, _ = a.step(np.random.default_rng(1000 + t).integers(0, 3, n))
        for x in (o, r, te, tr):
            h.update(np.ascontiguousarray(x).tobytes())
    a.close()
    out = subprocess.run([sys.executable, "-c", _CHILD, path, str(n), str(k), str(m)],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [os.path.dirname(os.path.dirname(stepring.__file__))] + sys.path)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == h.hexdigest()


def test_before_first_reset(tmp_path):
    """Saved before any reset: the restored envs take their first seeds
    (env i: seed + i) at their first reset, as the saved ones would."""
    path = str(tmp_path / "f.ckpt")
    a = stepring.make_vec(env_fns=[CartPoleEnv] * 6, num_workers=2, seed=11)
    a.checkpoint(path, backend="sync")
    b = stepring.make_vec(env_fns=[CartPoleEnv] * 6, num_workers=1, seed=0, inline=False)
    b.restore(path)
    oa, _ = a.reset()
    ob, _ = b.reset()
    assert np.array_equal(oa, ob)


class LockedEnv(CartPoleEnv):
    """A CartPole that holds a lock: it cannot be pickled."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()


@pytest.mark.parametrize("inline", [True, False])
def test_unpicklable(tmp_path, inline):
    path = str(tmp_path / "u.ckpt")
    fns = [CartPoleEnv] * 5 + [LockedEnv] + [CartPoleEnv] * 2
    a = stepring.make_vec(env_fns=fns, num_workers=2, seed=1, inline=inline)
    a.reset()
    a.step(np.zeros(8, np.int64))
    with pytest.raises(stepring.StepringError) as ei:
        a.checkpoint(path)
    msg = str(ei.value)
    assert "env 5 (LockedEnv) cannot be pickled" in msg
    assert "lock" in msg  # the reason, from pickle
    assert not os.path.exists(path)
    # The pool steps on, as a twin that never tried.
    t = stepring.make_vec(env_fns=fns, num_workers=2, seed=1, inline=inline)
    t.reset()
    t.step(np.zeros(8, np.int64))
    for s in range(20):
        x, y = a.step(np.ones(8, np.int64)), t.step(np.ones(8, np.int64))
        assert np.array_equal(x[0], y[0])
    assert a.fault_stats()["faults"] == 0
    a.close()
    t.close()


def test_refused(tmp_path):
    path = str(tmp_path / "r.ckpt")
    a = stepring.make_vec(env_fns=[CartPoleEnv] * 4, num_workers=2, seed=1)
    a.reset()
    a.checkpoint(path, backend="sync")
    info = stepring.checkpoint_info(path)
    assert info["env_id"] == "py:CartPoleEnv"
    b = stepring.make_vec(env_fns=[AcrobotEnv] * 4, num_workers=2, seed=1)
    b.reset()
    with pytest.raises(stepring.StepringError, match="env differs"):
        b.restore(path)
    c = stepring.make_vec(env_fns=[CartPoleEnv] * 5, num_workers=2, seed=1)
    with pytest.raises(stepring.StepringError, match="num_envs differs"):
        c.restore(path)
    for e in (a, b, c):
        e.close()


def test_local_class(tmp_path):
    """An env class defined in a function (pickle cannot name it: cloudpickle
    saves it by value) resumes exactly too."""

    class Local(CartPoleEnv):
        pass

    path = str(tmp_path / "l.ckpt")
    a = stepring.make_vec(env_fns=[Local] * 6, num_workers=2, seed=2, inline=False)
    a.reset()
    acts = _acts(a.single_action_space, 6, 0, 60)
    _run(a, acts[:20])
    a.checkpoint(path, backend="sync")
    want = _run(a, acts[20:])
    b = stepring.make_vec(env_fns=[Local] * 6, num_workers=1, seed=9)
    b.reset()
    b.restore(path)
    _same(want, _run(b, acts[20:]))
    a.close()
    b.close()
