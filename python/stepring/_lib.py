"""ctypes declarations of libstepring.so and the error mapping.

The library is found, in order, through the STEPRING_LIB environment
variable (a path to libstepring.so), then ../../build/libstepring.so next to
this package (a source checkout built in build/), then the system linker
path (ctypes.util.find_library("stepring")).

Only the C contracts are mirrored here: include/stepring/{common,env,ring,
pool}.h, and the optional replay/checkpoint/device headers when the loaded
library exports them (see `has()`).
"""
import ctypes
import ctypes.util
import errno
import os

c_u8 = ctypes.c_uint8
c_u32 = ctypes.c_uint32
c_i32 = ctypes.c_int32
c_u64 = ctypes.c_uint64
c_vp = ctypes.c_void_p
c_cp = ctypes.c_char_p


class StepringError(Exception):
    """A stepring C call failed. `errno` is the positive errno, `code` the
    negative return value, str() the library's sr_last_error() message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.errno = -code


class InvalidArgumentError(StepringError, ValueError):
    """-EINVAL: a bad option or value (NaN or out-of-range action, ...)."""


class UnknownEnvError(StepringError, LookupError):
    """-ENOENT: unknown env id, ring name or file."""

    def __str__(self):  # LookupError/KeyError would quote the message
        return self.args[0]


class UnsupportedError(StepringError, NotImplementedError):
    """-ENOSYS / -ENODEV: not built in, or no such device."""


class LibraryError(StepringError, RuntimeError):
    """Any other failure (-ENOMEM, -EIO, -EPROTO, ...)."""


# --- structs (must match the headers byte for byte) -----------------------

SR_ENV_MAX_DIMS = 4
SR_SPACE_DISCRETE = 1
SR_SPACE_BOX = 2


class sr_env_spec(ctypes.Structure):
    _fields_ = [
        ("abi_version", c_u32),
        ("spec_size", c_u32),
        ("id", c_cp),
        ("name", c_cp),
        ("state_size", c_u32),
        ("max_episode_steps", c_u32),
        ("obs_ndim", c_u32),
        ("obs_shape", c_u32 * SR_ENV_MAX_DIMS),
        ("obs_dim", c_u32),
        ("obs_low", ctypes.POINTER(ctypes.c_float)),
        ("obs_high", ctypes.POINTER(ctypes.c_float)),
        ("act_kind", c_u32),
        ("act_n", c_u32),
        ("act_dim", c_u32),
        ("act_low", ctypes.POINTER(ctypes.c_float)),
        ("act_high", ctypes.POINTER(ctypes.c_float)),
        ("n_phys", c_u32),
        ("reserved0", c_u32),
        ("params", c_u64 * 8),
        ("seed", c_vp),
        ("reset", c_vp),
        ("step", c_vp),
        ("observe", c_vp),
        ("get_phys", c_vp),
        ("set_phys", c_vp),
    ]


SR_AUTORESET_NEXT_STEP = 0
SR_AUTORESET_SAME_STEP = 1
SR_AUTORESET_DISABLED = 2
SR_BIND_CORE = 0
SR_BIND_NUMA = 1
SR_BIND_NONE = 2
SR_DEVICE_HOST = 0
SR_DEVICE_CUDA = 1
SR_DEVICE_AUTO = 2
SR_POOL_F_SEED = 1 << 0
SR_POOL_F_CPUSET = 1 << 1
SR_POOL_F_RING_NAME = 1 << 2
SR_POOL_F_FINAL_OBS = 1 << 3
SR_POOL_F_TOPOLOGY = 1 << 4


class sr_pool_opts(ctypes.Structure):
    _fields_ = [
        ("flags", c_u32),
        ("num_envs", c_u32),
        ("env", c_cp),
        ("spec", ctypes.POINTER(sr_env_spec)),
        ("num_threads", c_u32),
        ("batch_size", c_u32),
        ("seed", c_u64),
        ("autoreset", c_u32),
        ("bind", c_u32),
        ("cpuset", c_cp),
        ("ring_capacity", c_u64),
        ("ring_name", c_cp),
        ("device", c_u32),
        ("device_index", c_i32),
        ("topology", c_cp),
    ]


class sr_batch(ctypes.Structure):
    # Pointers as c_void_p: reading one gives a plain int (or None), which
    # is what the zero-copy views are built from, and is the fastest read.
    _fields_ = [
        ("n", c_u32),
        ("obs_dim", c_u32),
        ("obs", c_vp),
        ("reward", c_vp),
        ("terminated", c_vp),
        ("truncated", c_vp),
        ("env_id", c_vp),
        ("final_obs", c_vp),
        ("first_seq", c_u64),
    ]


class sr_pool_stats(ctypes.Structure):
    _fields_ = [
        ("steps", c_u64),
        ("episodes", c_u64),
        ("mean_return", ctypes.c_double),
        ("mean_length", ctypes.c_double),
        ("ns_env_step", c_u64),
        ("ns_ring_publish", c_u64),
        ("ns_collect", c_u64),
        ("ns_wait", c_u64),
    ]


# --- loading ---------------------------------------------------------------

def _candidates():
    env = os.environ.get("STEPRING_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.normpath(os.path.join(here, "..", "..", "build", "libstepring.so"))
    found = ctypes.util.find_library("stepring")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "stepring: cannot load libstepring.so; set STEPRING_LIB to its path "
        "(tried: %s)" % ("; ".join(tried) or "nothing found"))


lib, path = _load()

_PBATCH = ctypes.POINTER(sr_batch)
_PPBATCH = ctypes.POINTER(_PBATCH)

# name: (restype, argtypes). Required ones must exist; the others are looked
# up lazily through has().
_REQUIRED = {
    "sr_version": (ctypes.c_uint, []),
    "sr_version_string": (c_cp, []),
    "sr_build_info": (c_cp, []),
    "sr_strerror": (c_cp, [ctypes.c_int]),
    "sr_last_error": (c_cp, []),
    "sr_env_find": (ctypes.c_int, [c_cp, ctypes.POINTER(sr_env_spec)]),
    "sr_env_count": (ctypes.c_size_t, []),
    "sr_env_at": (ctypes.POINTER(sr_env_spec), [ctypes.c_size_t]),
}
_OPTIONAL = {
    "sr_env_load_plugin": (ctypes.c_int, [c_cp, ctypes.POINTER(sr_env_spec)]),
    "sr_pool_opts_init": (None, [ctypes.POINTER(sr_pool_opts)]),
    "sr_pool_create": (ctypes.c_int, [ctypes.POINTER(sr_pool_opts), ctypes.POINTER(c_vp)]),
    "sr_pool_destroy": (None, [c_vp]),
    "sr_pool_reset": (ctypes.c_int, [c_vp, _PPBATCH]),
    "sr_pool_step": (ctypes.c_int, [c_vp, c_vp, _PPBATCH]),
    "sr_pool_send": (ctypes.c_int, [c_vp, c_vp, c_vp, c_u32]),
    "sr_pool_recv": (ctypes.c_int, [c_vp, _PPBATCH]),
    "sr_pool_reset_mask": (ctypes.c_int, [c_vp, c_vp, _PPBATCH]),
    "sr_pool_spec": (ctypes.POINTER(sr_env_spec), [c_vp]),
    "sr_pool_ring": (c_vp, [c_vp]),
    "sr_pool_num_envs": (c_u32, [c_vp]),
    "sr_pool_num_threads": (c_u32, [c_vp]),
    "sr_pool_batch_size": (c_u32, [c_vp]),
    "sr_pool_stats_get": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_pool_stats)]),
    "sr_ring_base": (c_vp, [c_vp, ctypes.POINTER(ctypes.c_size_t)]),
    "sr_ring_capacity": (c_u64, [c_vp]),
    "sr_ring_obs_dim": (c_u32, [c_vp]),
    "sr_ring_act_size": (c_u32, [c_vp]),
    "sr_ring_head": (c_u64, [c_vp]),
    "sr_ring_cursor": (c_u64, [c_vp]),
    "sr_ring_oldest": (c_u64, [c_vp]),
    "sr_ring_slot_valid": (ctypes.c_bool, [c_vp, c_u64]),
}
for _name, (_res, _args) in _REQUIRED.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def declare(name, restype, argtypes):
    """Declare an optional function; returns it, or None if not exported."""
    try:
        f = getattr(lib, name)
    except AttributeError:
        return None
    f.restype = restype
    f.argtypes = argtypes
    return f


for _name, (_res, _args) in _OPTIONAL.items():
    declare(_name, _res, _args)


def has(name):
    """Does the loaded library export @name?"""
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False


def last_error():
    return (lib.sr_last_error() or b"").decode("utf-8", "replace")


def strerror(code):
    return lib.sr_strerror(code).decode("utf-8", "replace")


def error_for(code, what=None):
    """The exception for a negative return @code, carrying sr_last_error().
    Must be called right after the failing call, in the same thread (the
    message is thread-local in the library)."""
    msg = last_error() or strerror(code)
    if what:
        msg = "%s: %s" % (what, msg)
    e = -code
    if e == errno.EINVAL or e == errno.ERANGE:
        cls = InvalidArgumentError
    elif e == errno.ENOENT:
        cls = UnknownEnvError
    elif e in (errno.ENOSYS, errno.ENODEV, errno.EOPNOTSUPP):
        cls = UnsupportedError
    else:
        cls = LibraryError
    return cls(code, msg)


def check(code, what=None):
    """Raise the matching StepringError if @code < 0; else return it."""
    if code < 0:
        raise error_for(code, what)
    return code
