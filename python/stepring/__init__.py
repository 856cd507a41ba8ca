"""stepring: parallel RL environment stepping over a shared-memory ring.

    import stepring
    with stepring.make_vec("CartPole-v1", 16, seed=0) as envs:
        obs, info = envs.reset()
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

The package is a ctypes binding of libstepring.so (see _lib.py for how the
library is found: STEPRING_LIB first). When gymnasium is importable,
VectorEnv is a gymnasium.vector.VectorEnv and importing stepring registers
every built-in env as "stepring/<id>":

    import gymnasium, stepring
    envs = gymnasium.make_vec("stepring/CartPole-v1", num_envs=64)
"""
from . import _lib, spaces
from ._lib import (StepringError, InvalidArgumentError, UnknownEnvError, UnsupportedError,
                   TryAgainError, LibraryError, OutOfRangeError, ResetNeededError, BusyError,
                   InvalidCallError, InvalidTypeError)
from ._utils import ClosedError
from ._lib import checkpoint_info
from .vector import VectorEnv, EnvSpec
from .replay import Replay
from .registration import make_vec, register_envs

__all__ = ["make_vec", "VectorEnv", "EnvSpec", "spaces", "list_envs", "version",
           "StepringError", "InvalidArgumentError", "UnknownEnvError", "UnsupportedError",
           "LibraryError", "TryAgainError", "library_path", "build_info", "Replay",
           "checkpoint_info", "register_envs", "OutOfRangeError", "ResetNeededError",
           "BusyError", "InvalidCallError", "InvalidTypeError", "ClosedError"]

library_path = _lib.path


def version():
    """Version string of the loaded libstepring ("0.1.0")."""
    return _lib.lib.sr_version_string().decode()


def build_info():
    """Build description of the loaded library (build type, backends)."""
    return _lib.lib.sr_build_info().decode()


def list_envs():
    """Gymnasium ids of the built-in env types."""
    out = []
    for i in range(_lib.lib.sr_env_count()):
        s = _lib.lib.sr_env_at(i)
        if s:
            out.append(s.contents.id.decode())
    return out


__version__ = version()

register_envs()
