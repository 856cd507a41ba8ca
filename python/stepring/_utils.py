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
