"""Helpers the env classes and the replay sampler share (as
gymnasium/vector/utils/): whether Gymnasium is there, argument checks,
the option tables, spaces from a C spec. It imports no class of
stepring's (VectorEnv, ProcVectorEnv, Replay): each of them imports it,
and it imports only _lib and spaces.
"""
import math
import os

import numpy as np

from . import _lib
from . import spaces as _own_spaces

_gym = None
AutoresetMode = None
if not os.environ.get("STEPRING_NO_GYMNASIUM"):
    try:
        import gymnasium as _gym
        from gymnasium.vector import AutoresetMode
        from gymnasium.vector.utils import batch_space as _gym_batch_space
    except ImportError:  # the binding works without Gymnasium
        _gym = None
        AutoresetMode = None

_MODES = {"nextstep": "next_step", "samestep": "same_step", "disabled": "disabled"}
_AUTORESET = {
    "next_step": _lib.SR_AUTORESET_NEXT_STEP,
    "same_step": _lib.SR_AUTORESET_SAME_STEP,
    "disabled": _lib.SR_AUTORESET_DISABLED,
}
_BIND = {"core": _lib.SR_BIND_CORE, "numa": _lib.SR_BIND_NUMA, "none": _lib.SR_BIND_NONE}
_DEVICE = {"cpu": _lib.SR_DEVICE_HOST, "cuda": _lib.SR_DEVICE_CUDA}

U32 = 2**32 - 1
U64 = 2**64 - 1
MAX_ENVS = 2**31 - 1  # the pool's queues keep a flag in bit 31 of an env index


def _autoreset_name(mode):
    """'next_step' | 'same_step' | 'disabled' from our names, Gymnasium's
    AutoresetMode members or their values ('NextStep' ...)."""
    if AutoresetMode is not None and isinstance(mode, AutoresetMode):
        mode = mode.value
    if isinstance(mode, str):
        key = mode.lower().replace("_", "").replace("-", "")
        if key in _MODES:
            return _MODES[key]
    raise ValueError("autoreset_mode must be one of next_step, same_step, disabled (or "
                     "gymnasium.vector.AutoresetMode), not %r" % (mode,))


def _metadata_mode(name):
    if AutoresetMode is None:
        return name
    return {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP,
            "disabled": AutoresetMode.DISABLED}[name]


def _as_int(name, v, lo, hi, what="an int"):
    """@v as a Python int in [lo, hi]: ValueError for a non-integer (bools
    and non-integral floats included), OutOfRangeError (a ValueError and an
    OverflowError) outside the range, never a silent wrap-around."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        if isinstance(v, (float, np.floating)) and math.isfinite(v) and v == int(v):
            v = int(v)
        else:
            raise ValueError("%s must be %s, not %r" % (name, what, v))
    v = int(v)
    if v < lo or v > hi:
        raise _lib.OutOfRangeError("%s = %d is out of range: it must be in [%d, %d]"
                                   % (name, v, lo, hi))
    return v


def _as_count(name, v, hi=MAX_ENVS):
    return _as_int(name, v, 1, hi, "a positive int")


def _as_seed(name, v):
    return _as_int(name, v, 0, U64, "a non-negative int (a seed)")


def _spec_spaces(spec):
    """(single observation space, single action space) of a C spec, as
    Gymnasium's classes when gymnasium is importable, else ours."""
    sp = _gym.spaces if _gym is not None else _own_spaces
    shape = tuple(spec.obs_shape[i] for i in range(spec.obs_ndim))
    d = spec.obs_dim
    low = np.ctypeslib.as_array(spec.obs_low, (d,)).copy() if spec.obs_low else \
        np.full(d, -np.inf, np.float32)
    high = np.ctypeslib.as_array(spec.obs_high, (d,)).copy() if spec.obs_high else \
        np.full(d, np.inf, np.float32)
    obs = sp.Box(low.reshape(shape), high.reshape(shape), dtype=np.float32)
    if spec.act_kind == _lib.SR_SPACE_DISCRETE:
        act = sp.Discrete(int(spec.act_n))
    else:
        a = spec.act_dim
        act = sp.Box(np.ctypeslib.as_array(spec.act_low, (a,)).copy(),
                     np.ctypeslib.as_array(spec.act_high, (a,)).copy(), dtype=np.float32)
    return obs, act


def _batch_space(space, n):
    if _gym is not None:
        return _gym_batch_space(space, n)
    return _own_spaces.batch_space(space, n)


def _fspath(path):
    return os.fsencode(path)


_CLOSED_BASES = (_lib.StepringError, RuntimeError)
if _gym is not None:
    _CLOSED_BASES += (_gym.error.ClosedEnvironmentError,)


class ClosedError(*_CLOSED_BASES):
    """A call on a closed env: a RuntimeError and, with Gymnasium, a
    gymnasium.error.ClosedEnvironmentError (what AsyncVectorEnv raises)."""

    def __init__(self, message="stepring: this env is closed"):
        super().__init__(-9, message)  # -EBADF


def _check_reset_mask(mask, num_envs):
    """options["reset_mask"] as SyncVectorEnv takes it: a numpy bool array
    of shape (num_envs,) with some env set. The same checks in the same
    order, with Gymnasium's messages, as InvalidCallError (an
    AssertionError, as Gymnasium's, and a ValueError)."""
    what = "`options['reset_mask': mask]`"
    if not isinstance(mask, np.ndarray):
        raise _lib.InvalidCallError("%s must be a numpy array, got %s" % (what, type(mask)))
    if mask.shape != (num_envs,):
        raise _lib.InvalidCallError("%s must have shape `(%d,)`, got %s"
                                    % (what, num_envs, mask.shape))
    if mask.dtype != np.bool_:
        raise _lib.InvalidCallError("%s must have `dtype=np.bool_`, got %s" % (what, mask.dtype))
    if not mask.any():
        raise _lib.InvalidCallError("%s must contain a boolean array, got reset_mask=%s"
                                    % (what, mask))
    return np.ascontiguousarray(mask)


def _reset_seeds(seed, num_envs):
    """reset(seed=...) as SyncVectorEnv takes it: (one int seed or None,
    None) or (None, a list of num_envs seeds or None). A list of another
    length is an InvalidCallError (SyncVectorEnv asserts it), a seed of
    another type an InvalidTypeError, a negative or too large one an
    OutOfRangeError."""
    if seed is None:
        return None, None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        return _as_seed("seed", seed), None
    if isinstance(seed, (list, tuple, np.ndarray)):
        seeds = list(seed)
        if len(seeds) != num_envs:
            raise _lib.InvalidCallError(
                "If seeds are passed as a list the length must match num_envs=%d but got "
                "length=%d." % (num_envs, len(seeds)))
        return None, [None if x is None else _as_seed("seed[%d]" % i, x)
                      for i, x in enumerate(seeds)]
    raise _lib.InvalidTypeError("seed must be None, an int or a list of num_envs ints or None, "
                                "not %r" % (seed,))


def _values_per_env(name, values, num_envs):
    """set_attr's values as SyncVectorEnv spreads them: a list or tuple is one
    value per env (ValueError for another length), anything else the value
    of every env."""
    if not isinstance(values, (list, tuple)):
        return [values] * num_envs
    if len(values) != num_envs:
        raise ValueError("Values must be a list or tuple with length equal to the number of "
                         "environments. Got `%d` values for %d environments."
                         % (len(values), num_envs))
    return list(values)


def _rng_is_numpy(env_id):
    """Whether a built-in env id says rng=numpy ("CartPole-v1:rng=numpy")."""
    _, _, params = str(env_id).partition(":")
    return "rng=numpy" in params.split(",")
