"""Replay sampling over a VectorEnv's ring (stepring/replay.h).

The ring the pool steps into is also the replay window: every transition
(s, a, r, s') stays readable until the producers lap it. A Replay samples
transitions (uniform or prioritized, n-step returns) or sequences from it,
copying them into fresh numpy arrays; the C sampler checks every slot
before and after the copy and never returns a torn transition.
"""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib, check
from ._utils import _as_int

_KINDS = {"uniform": _lib.SR_REPLAY_UNIFORM, "prioritized": _lib.SR_REPLAY_PRIORITIZED}


class Replay:
    """A sampler over @env's ring. Use VectorEnv.replay() to make one.

    kind: 'uniform' or 'prioritized'. n_step, gamma: n-step returns
    (reward is the discounted sum, discount = gamma^m). alpha, beta, eps:
    prioritized sampling. samples_per_insert, min_size, error_buffer,
    timeout_ms: Reverb-style rate limiter (timeout 0: refuse at once).
    seed: the sampler's RNG.

    The sampler keeps the env's pool (and its ring) alive until close().
    One thread at a time.
    """

    def __init__(self, env, kind="uniform", *, seed=None, n_step=None, gamma=0.99, alpha=None,
                 beta=None, eps=None, samples_per_insert=None, min_size=0, error_buffer=None,
                 timeout_ms=0, output="numpy"):
        self._s = None
        if kind not in _KINDS:
            raise ValueError("kind must be 'uniform' or 'prioritized', not %r" % (kind,))
        if output not in ("numpy", "torch"):
            raise ValueError("output must be 'numpy' or 'torch', not %r" % (output,))
        env._live()
        self._owner = env._handle  # the ring must outlive the sampler
        self._ring = env._ring
        self._obs_shape = env._obs_shape
        self._obs_dim = int(np.prod(env._obs_shape))
        self._discrete = env._discrete
        self._act_dim = env._act_dim
        self._torch = output == "torch"
        self.kind = kind
        o = _lib.sr_replay_opts()
        lib.sr_replay_opts_init(ctypes.byref(o))
        o.kind = _KINDS[kind]
        if seed is not None:
            o.flags |= _lib.SR_REPLAY_F_SEED
            o.seed = _as_int("seed", seed, 0, 2**64 - 1, "a non-negative int")
        if n_step is not None or gamma != 0.99:
            o.flags |= _lib.SR_REPLAY_F_NSTEP
            o.n_step = 1 if n_step is None else _as_int("n_step", n_step, 1, 2**32 - 1,
                                                        "a positive int")
            o.gamma = float(gamma)
        if alpha is not None or beta is not None or eps is not None:
            o.flags |= _lib.SR_REPLAY_F_PRIORITY
            if alpha is not None:
                o.alpha = float(alpha)
            if beta is not None:
                o.beta = float(beta)
            if eps is not None:
                o.eps = float(eps)
        if samples_per_insert is not None:
            o.flags |= _lib.SR_REPLAY_F_LIMITER
            o.samples_per_insert = float(samples_per_insert)
            o.min_size = _as_int("min_size", min_size, 0, 2**64 - 1, "a non-negative int")
            o.error_buffer = float(error_buffer if error_buffer is not None
                                   else max(1.0, samples_per_insert))
            o.timeout_ms = _as_int("timeout_ms", timeout_ms, -2**31, 2**31 - 1, "an int")
        s = ctypes.c_void_p()
        check(lib.sr_replay_create(self._ring, ctypes.byref(o), ctypes.byref(s)))
        self._s = s.value

    def _live(self):
        if self._s is None:
            raise RuntimeError("stepring: this replay sampler is closed")
        return self._s

    def close(self):
        """Free the sampler (then the pool may go). Safe to call twice."""
        s, self._s = self._s, None
        if s:
            lib.sr_replay_destroy(s)
        self._owner = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _out(self, d):
        if self._torch:
            import torch
            return {k: torch.from_numpy(v.astype(np.int64) if v.dtype in (np.uint32, np.uint64)
                                        else v) for k, v in d.items()}
        return d

    def _actions(self, shape):
        if self._discrete:
            return np.empty(shape, np.int32)
        return np.empty(shape + (self._act_dim,), np.float32)

    def sample(self, batch_size):
        """batch_size transitions as a dict of new arrays: obs, next_obs,
        action, reward, discount, terminated, truncated, env_id, seq (the key
        for update()) and weight (importance weights; 1 for uniform).
        Raises TryAgainError when no transition is live yet or the rate
        limiter refuses."""
        s = self._live()
        n = _as_int("batch_size", batch_size, 1, 2**32 - 1, "a positive int")
        if n < 1:
            raise ValueError("batch_size must be >= 1, not %r" % (batch_size,))
        d = {
            "obs": np.empty((n,) + self._obs_shape, np.float32),
            "next_obs": np.empty((n,) + self._obs_shape, np.float32),
            "action": self._actions((n,)),
            "reward": np.empty(n, np.float32),
            "discount": np.empty(n, np.float32),
            "terminated": np.empty(n, np.bool_),
            "truncated": np.empty(n, np.bool_),
            "env_id": np.empty(n, np.uint32),
            "seq": np.empty(n, np.uint64),
            "weight": np.empty(n, np.float32),
        }
        b = _lib.sr_replay_batch(**{k: v.ctypes.data for k, v in d.items()})
        check(lib.sr_replay_sample(s, n, ctypes.byref(b)))
        return self._out(d)

    def sample_sequences(self, batch_size, length):
        """batch_size sequences of length consecutive steps of one env and
        one episode, oldest first: obs [n, k, ...], action, reward,
        terminated, truncated, flags [n, k], env_id [n], seq [n, k]."""
        s = self._live()
        n = _as_int("batch_size", batch_size, 1, 2**32 - 1, "a positive int")
        k = _as_int("length", length, 1, 2**32 - 1, "a positive int")
        if n < 1 or k < 1:
            raise ValueError("batch_size and length must be >= 1")
        d = {
            "obs": np.empty((n, k) + self._obs_shape, np.float32),
            "action": self._actions((n, k)),
            "reward": np.empty((n, k), np.float32),
            "terminated": np.empty((n, k), np.bool_),
            "truncated": np.empty((n, k), np.bool_),
            "flags": np.empty((n, k), np.uint8),
            "env_id": np.empty(n, np.uint32),
            "seq": np.empty((n, k), np.uint64),
        }
        b = _lib.sr_replay_seq_batch(**{k_: v.ctypes.data for k_, v in d.items()})
        check(lib.sr_replay_sample_seq(s, n, k, ctypes.byref(b)))
        return self._out(d)

    def update(self, seq, priorities):
        """Prioritized: set the priorities of sampled transitions (by their
        seq keys). Returns how many were still live and updated."""
        s = self._live()
        keys = np.ascontiguousarray(np.asarray(seq), dtype=np.uint64).reshape(-1)
        pr = np.ascontiguousarray(np.asarray(priorities), dtype=np.float32).reshape(-1)
        if keys.size != pr.size:
            raise ValueError("update: %d keys but %d priorities" % (keys.size, pr.size))
        return check(lib.sr_replay_update(s, keys.ctypes.data, pr.ctypes.data, keys.size))

    def sync(self):
        """Take in the transitions published since the last call; returns
        how many."""
        return int(lib.sr_replay_sync(self._live()))

    def can_insert(self, n=1):
        return bool(lib.sr_replay_can_insert(self._live(),
                                             _as_int("n", n, 0, 2**64 - 1, "an int")))

    @property
    def inserts(self):
        return int(_lib.replay_info(self._live()).inserts)

    @property
    def samples(self):
        return int(_lib.replay_info(self._live()).samples)

    @property
    def size(self):
        return int(_lib.replay_info(self._live()).live)

    @property
    def total_priority(self):
        return float(_lib.replay_info(self._live()).total_priority)
