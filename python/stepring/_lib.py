"""ctypes declarations of libstepring.so and the error mapping.

The library is found, in order, through the STEPRING_LIB environment
variable (a path to libstepring.so: an override), then libstepring.so in
this package's folder (an installed package carries its own: pip install .),
then ../../build/libstepring.so next to this package (a source checkout
built in build/), then the system linker path
(ctypes.util.find_library("stepring")).

The C headers are mirrored here: include/stepring/{common,env,ring,pool,
replay,checkpoint,device,mpi}.h (python/tests/test_abi.py checks the struct
layouts and the constants against them). At load the library's version is
checked against the one this binding was written for (ABI_VERSION): the
same major version, and a minor version at least as new.
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


class TryAgainError(StepringError, RuntimeError):
    """-EAGAIN: nothing ready yet (no live transition, rate limiter), or, from
    creating a VectorEnv or a checkpoint, the system refused a thread or a
    process: the message names the limit (RLIMIT_NPROC, kernel.threads-max);
    retrying does not help until the limit is raised or threads are freed."""


class LibraryError(StepringError, RuntimeError):
    """Any other failure (-ENOMEM, -EIO, -EPROTO, ...)."""


class OutOfRangeError(InvalidArgumentError, OverflowError):
    """An integer argument outside what its C field holds (num_envs >= 2**31,
    a seed >= 2**64 ...): refused instead of wrapped around. Both a
    ValueError and an OverflowError."""

    def __init__(self, message):
        super().__init__(-errno.ERANGE, message)


class ResetNeededError(StepringError, AssertionError):
    """autoreset_mode='disabled': step() with an env whose episode ended and
    that was not reset since (Gymnasium's SyncVectorEnv fails an assertion
    there). An AssertionError, like Gymnasium's."""

    def __init__(self, message):
        super().__init__(-errno.EINVAL, message)


class InvalidCallError(InvalidArgumentError, AssertionError):
    """A call that Gymnasium's SyncVectorEnv refuses with a failed assertion
    (a reset_mask that is not a bool array of num_envs with an env set, a
    list of seeds of another length than num_envs): an AssertionError as
    Gymnasium's, and a ValueError (InvalidArgumentError) as stepring's."""

    def __init__(self, message):
        super().__init__(-errno.EINVAL, message)


class InvalidTypeError(InvalidArgumentError, TypeError):
    """An argument of a type the call cannot take where SyncVectorEnv raises a
    TypeError (step(0): a scalar where num_envs actions are due, a seed that
    is neither an int nor a list): a TypeError, and a ValueError."""

    def __init__(self, message):
        super().__init__(-errno.EINVAL, message)


class BusyError(StepringError, RuntimeError):
    """A call on an env while another thread is inside a call on the same env
    (step, reset, close ...): an env is driven from one thread at a time."""

    def __init__(self, message):
        super().__init__(-errno.EBUSY, message)


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
        # ABI v2 tail
        ("flags", c_u32),
        ("save_max", c_u32),
        ("check_state", c_vp),
        ("create", c_vp),
        ("destroy", c_vp),
        ("save", c_vp),
        ("load", c_vp),
        # ABI v3 tail
        ("obs_dtype", c_u32),
        ("obs_kind", c_u32),
        ("obs_low64", ctypes.POINTER(ctypes.c_double)),
        ("obs_high64", ctypes.POINTER(ctypes.c_double)),
    ]


class sr_env_param(ctypes.Structure):
    _fields_ = [
        ("name", c_cp),
        ("value", ctypes.c_double),
        ("flags", c_u32),
        ("reserved0", c_u32),
        ("note", c_cp),
    ]


SR_ENV_PARAM_CREATE = 1
SR_ENV_PARAM_LIVE = 2
SR_ENV_PARAM_BOOL = 4

SR_AUTORESET_NEXT_STEP = 0
SR_AUTORESET_SAME_STEP = 1
SR_AUTORESET_DISABLED = 2

SR_ENV_F_OPAQUE = 1
SR_ENV_F_FOREIGN = 2  # the envs live in worker programs (stepring/env.h)
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
SR_POOL_F_FIRST_ENV = 1 << 9


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
        ("first_env", c_u64),
        ("worker_argv", ctypes.POINTER(c_cp)),
        ("worker_payload", c_vp),
        ("worker_payload_len", ctypes.c_size_t),
        ("step_timeout_ms", c_u32),
        ("max_restarts", c_u32),
        ("proc_inline", c_vp),
        ("proc_inline_arg", c_vp),
        ("worker_out_size", ctypes.c_size_t),
    ]


SR_RESET_F_MASK = 1 << 0
SR_RESET_F_SEED = 1 << 1
SR_RESET_F_SEEDS = 1 << 2
SR_RESET_F_OPTIONS = 1 << 3
SR_RESET_F_PAYLOAD = 1 << 4
SR_PROC_RESET_PAYLOAD_MAX = 65536


class sr_pool_reset_opts(ctypes.Structure):
    _fields_ = [
        ("flags", c_u32),
        ("reserved0", c_u32),
        ("mask", c_vp),
        ("seed", c_u64),
        ("seeds", c_vp),
        ("seed_mask", c_vp),
        ("options", c_cp),
        ("payload", c_vp),
        ("payload_len", ctypes.c_size_t),
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
        ("nonfinite", c_u32),
        ("reserved0", c_u32),
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
        ("ns_send", c_u64),
        ("nonfinite_rows", c_u64),
        ("nonfinite_env", ctypes.c_int64),
        ("check_finite", c_u32),
        ("reserved0", c_u32),
    ]


class sr_mpi_pool_info(ctypes.Structure):
    _fields_ = [
        ("rank", c_u32), ("size", c_u32),
        ("local_rank", c_u32), ("local_size", c_u32),
        ("node", c_u32), ("nodes", c_u32),
        ("num_envs", c_u64), ("first_env", c_u64),
        ("local_envs", c_u32), ("num_threads", c_u32),
        ("cpus", ctypes.c_char * 256),
    ]


class sr_pool_info(ctypes.Structure):
    """include/stepring/pool.h; pool_info() sets size."""
    _fields_ = [
        ("size", c_u32), ("num_envs", c_u32), ("num_threads", c_u32),
        ("batch_size", c_u32), ("batch_groups", c_u32), ("autoreset", c_u32),
        ("device", c_u32), ("reserved0", c_u32), ("first_env", c_u64),
        ("spec", ctypes.POINTER(sr_env_spec)), ("ring", c_vp), ("threads_note", c_cp),
    ]


class sr_pool_worker_stats(ctypes.Structure):
    _fields_ = [
        ("steps", c_u64),
        ("ns_env_step", c_u64),
        ("ns_ring_publish", c_u64),
        ("ns_idle", c_u64),
        ("first_env", c_u32),
        ("num_envs", c_u32),
        ("cpu", ctypes.c_int32),
        ("rows", c_u32),
        ("pid", ctypes.c_int32),
        ("restarts", c_u32),
    ]


SR_POOL_F_PROCS = 1 << 10
SR_POOL_F_PROC_INLINE = 1 << 11
SR_POOL_F_CHECK_FINITE = 1 << 12
SR_POOL_F_NO_CHECK_FINITE = 1 << 13
SR_SLOT_FIRST = 1 << 0
SR_SLOT_PAD = 1 << 1
SR_SLOT_FINAL = 1 << 2
SR_SLOT_FAULT = 1 << 3
SR_SLOT_NONFINITE = 1 << 4
SR_RING_NO_PREV = (1 << 64) - 1
SR_PROC_CMD_STEP = 1
SR_PROC_CMD_RESET = 2
SR_PROC_CMD_STOP = 3


class sr_pool_faults(ctypes.Structure):
    _fields_ = [
        ("faults", c_u64),
        ("restarts", c_u64),
        ("fault_rows", c_u64),
        ("last", ctypes.c_char * 1024),
    ]


class sr_proc_info(ctypes.Structure):
    _fields_ = [
        ("index", c_u32), ("first_env", c_u32), ("n_envs", c_u32), ("num_envs", c_u32),
        ("restarts", c_u32), ("autoreset", c_u32), ("obs_dim", c_u32), ("act_size", c_u32),
        ("seed", c_u64), ("env_base", c_u64), ("payload", c_vp),
        ("payload_len", ctypes.c_size_t), ("ring", c_vp), ("final_obs", c_vp),
        ("out", c_vp), ("out_size", ctypes.c_size_t),
    ]


class sr_proc_cmd(ctypes.Structure):
    _fields_ = [
        ("kind", c_u32), ("gen", c_u32), ("seq", c_u64), ("actions", c_vp), ("mask", c_vp),
        ("lo", c_u32), ("n", c_u32), ("ids", c_vp), ("row", c_u64),
        ("reset_flags", c_u32), ("reserved0", c_u32), ("reset_seed", c_u64), ("seeds", c_vp),
        ("seed_mask", c_vp), ("reset_b", ctypes.c_double * 2), ("payload", c_vp),
        ("payload_len", ctypes.c_size_t),
    ]


# --- loading ---------------------------------------------------------------

def _candidates():
    env = os.environ.get("STEPRING_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libstepring.so")
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

# The library version this binding mirrors (include/stepring/version.h):
# major.minor. A library of another major version, or an older minor one,
# is refused at import with both versions named.
ABI_VERSION = (0, 1)


def _handshake():
    try:
        f = lib.sr_version
    except AttributeError:
        raise ImportError("stepring: %s is not libstepring (no sr_version)" % path)
    if isinstance(f, ctypes._CFuncPtr):
        f.restype = ctypes.c_uint
        f.argtypes = []
    v = f()
    have = (v >> 16, (v >> 8) & 0xff)
    if have[0] != ABI_VERSION[0] or have[1] < ABI_VERSION[1]:
        raise ImportError(
            "stepring: %s is libstepring %d.%d.%d; this binding needs %d.%d or a newer "
            "%d.x (set STEPRING_LIB to a matching build)"
            % (path, have[0], have[1], v & 0xff, ABI_VERSION[0], ABI_VERSION[1],
               ABI_VERSION[0]))


_handshake()

class sr_ring_info(ctypes.Structure):
    """include/stepring/ring.h; set size = ctypes.sizeof(sr_ring_info)."""
    _fields_ = [
        ("size", c_u32), ("kind", c_u32), ("version", c_u32), ("flags", c_u32),
        ("capacity", c_u64), ("obs_dim", c_u32), ("act_size", c_u32),
        ("header_bytes", c_u32), ("uid", c_u32), ("bytes", c_u64), ("base", c_vp),
        ("creator_pid", ctypes.c_int64), ("create_time", c_u64), ("head", c_u64),
        ("cursor", c_u64), ("oldest", c_u64), ("reserve_waits", c_u64),
        ("pad_slots", c_u64), ("consumed_batches", c_u64), ("offsets", c_u64 * 9),
        ("name", ctypes.c_char * 256),
    ]


_PBATCH = ctypes.POINTER(sr_batch)
_PPBATCH = ctypes.POINTER(_PBATCH)

# name: (restype, argtypes). Every one exists in every build of this
# version (without MPI the sr_mpi_* functions answer -ENOSYS): a missing
# one is an ImportError at load, not a hedge at each call.
_FUNCS = {
    "sr_version": (ctypes.c_uint, []),
    "sr_version_string": (c_cp, []),
    "sr_build_info": (c_cp, []),
    "sr_strerror": (c_cp, [ctypes.c_int]),
    "sr_last_error": (c_cp, []),
    "sr_env_find": (ctypes.c_int, [c_cp, ctypes.POINTER(sr_env_spec)]),
    "sr_env_count": (ctypes.c_size_t, []),
    "sr_env_at": (ctypes.POINTER(sr_env_spec), [ctypes.c_size_t]),
    "sr_env_load_plugin": (ctypes.c_int, [c_cp, ctypes.POINTER(sr_env_spec)]),
    "sr_env_param_at": (ctypes.c_int, [ctypes.POINTER(sr_env_spec), ctypes.c_size_t,
                                       ctypes.POINTER(sr_env_param)]),
    "sr_env_param_find": (ctypes.c_int, [ctypes.POINTER(sr_env_spec), c_cp,
                                         ctypes.POINTER(sr_env_param)]),
    "sr_pool_set_params": (ctypes.c_int, [c_vp, c_cp]),
    "sr_pool_opts_init": (None, [ctypes.POINTER(sr_pool_opts)]),
    "sr_pool_create": (ctypes.c_int, [ctypes.POINTER(sr_pool_opts), ctypes.POINTER(c_vp)]),
    "sr_pool_destroy": (None, [c_vp]),
    "sr_pool_reset": (ctypes.c_int, [c_vp, _PPBATCH]),
    "sr_pool_step": (ctypes.c_int, [c_vp, c_vp, _PPBATCH]),
    "sr_pool_send": (ctypes.c_int, [c_vp, c_vp, c_vp, c_u32]),
    "sr_pool_recv": (ctypes.c_int, [c_vp, _PPBATCH]),
    "sr_pool_reset_mask": (ctypes.c_int, [c_vp, c_vp, _PPBATCH]),
    "sr_pool_reset_opts_init": (None, [ctypes.POINTER(sr_pool_reset_opts)]),
    "sr_pool_reset_ex": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_pool_reset_opts), _PPBATCH]),
    "sr_pool_info_get": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_pool_info)]),
    "sr_pool_stats_get": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_pool_stats)]),
    "sr_pool_worker_stats_get": (ctypes.c_int, [c_vp, c_u32,
                                                ctypes.POINTER(sr_pool_worker_stats)]),
    "sr_ring_capacity": (c_u64, [c_vp]),
    "sr_ring_obs_dim": (c_u32, [c_vp]),
    "sr_ring_act_size": (c_u32, [c_vp]),
    "sr_ring_head": (c_u64, [c_vp]),
    "sr_ring_cursor": (c_u64, [c_vp]),
    "sr_ring_info_get": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_ring_info)]),
    "sr_ring_probe": (ctypes.c_int, [c_cp, ctypes.POINTER(sr_ring_info)]),
    "sr_ring_slot_valid": (ctypes.c_bool, [c_vp, c_u64]),
    "sr_ring_obs_col": (c_vp, [c_vp]),
    "sr_ring_action_col": (c_vp, [c_vp]),
    "sr_ring_reward_col": (c_vp, [c_vp]),
    "sr_ring_terminated_col": (c_vp, [c_vp]),
    "sr_ring_truncated_col": (c_vp, [c_vp]),
    "sr_ring_flags_col": (c_vp, [c_vp]),
    "sr_ring_env_id_col": (c_vp, [c_vp]),
    "sr_ring_prev_col": (c_vp, [c_vp]),
    "sr_ring_publish": (None, [c_vp, c_u64, c_u32]),
    "sr_ring_reserve": (ctypes.c_int, [c_vp, c_u32, c_u32, ctypes.POINTER(c_u64)]),
    # stepring/proc.h and process pools (SR_POOL_F_PROCS)
    "sr_pool_faults_get": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_pool_faults)]),
    "sr_pool_worker_out": (ctypes.c_int, [c_vp, c_u32, ctypes.POINTER(c_vp),
                                          ctypes.POINTER(ctypes.c_size_t)]),
    "sr_proc_worker_open": (ctypes.c_int, [ctypes.POINTER(c_vp), ctypes.POINTER(sr_proc_info)]),
    "sr_proc_worker_ready": (None, [c_vp]),
    "sr_proc_worker_wait": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_proc_cmd)]),
    "sr_proc_worker_done": (None, [c_vp, c_u64, c_u64]),
    "sr_proc_worker_episode": (None, [c_vp, ctypes.c_double, c_u64]),
    "sr_proc_worker_fail": (None, [c_vp, c_cp]),
    "sr_proc_worker_xchg": (ctypes.c_int, [c_vp, ctypes.POINTER(c_vp),
                                           ctypes.POINTER(ctypes.c_size_t)]),
    "sr_proc_worker_xchg_end": (None, [c_vp, ctypes.c_int, c_u64, c_cp]),
    "sr_proc_seed": (c_u64, [c_u64, c_u32, c_u32]),
    # stepring/mpi.h (a build without MPI answers -ENOSYS)
    "sr_mpi_env_range": (ctypes.c_int, [c_u64, c_u32, c_u32, ctypes.POINTER(c_u64),
                                        ctypes.POINTER(c_u32)]),
    "sr_mpi_pool_create_f": (ctypes.c_int, [ctypes.c_int64, ctypes.POINTER(sr_pool_opts), c_vp,
                                            ctypes.POINTER(c_vp)]),
    "sr_mpi_pool_info_get": (ctypes.c_int, [c_vp, ctypes.POINTER(sr_mpi_pool_info)]),
    "sr_mpi_pool_detach": (c_vp, [c_vp]),
}


def declare(name, restype, argtypes):
    """Declare a function of the library; ImportError naming it if it is
    missing (a library older than its version says)."""
    try:
        f = getattr(lib, name)
    except AttributeError:
        raise ImportError("stepring: %s has no %s, though its version matches "
                          "(a mixed-up build?)" % (path, name))
    f.restype = restype
    f.argtypes = argtypes
    return f


for _name, (_res, _args) in _FUNCS.items():
    declare(_name, _res, _args)


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
    elif e == errno.EAGAIN:
        cls = TryAgainError
    else:
        cls = LibraryError
    return cls(code, msg)


def check(code, what=None):
    """Raise the matching StepringError if @code < 0; else return it."""
    if code < 0:
        raise error_for(code, what)
    return code


# --- replay (stepring/replay.h) ---------------------------------------------

SR_REPLAY_UNIFORM = 0
SR_REPLAY_PRIORITIZED = 1
SR_REPLAY_F_SEED = 1 << 0
SR_REPLAY_F_NSTEP = 1 << 1
SR_REPLAY_F_PRIORITY = 1 << 2
SR_REPLAY_F_LIMITER = 1 << 3


class sr_replay_opts(ctypes.Structure):
    _fields_ = [
        ("flags", c_u32),
        ("kind", c_u32),
        ("seed", c_u64),
        ("n_step", c_u32),
        ("reserved0", c_u32),
        ("gamma", ctypes.c_double),
        ("alpha", ctypes.c_double),
        ("beta", ctypes.c_double),
        ("eps", ctypes.c_double),
        ("samples_per_insert", ctypes.c_double),
        ("min_size", c_u64),
        ("error_buffer", ctypes.c_double),
        ("timeout_ms", c_i32),
        ("reserved1", c_u32),
    ]


class sr_replay_batch(ctypes.Structure):
    _fields_ = [(k, c_vp) for k in ("obs", "next_obs", "action", "reward", "discount",
                                    "terminated", "truncated", "env_id", "seq", "weight")]


class sr_replay_seq_batch(ctypes.Structure):
    _fields_ = [(k, c_vp) for k in ("obs", "action", "reward", "terminated", "truncated",
                                    "flags", "env_id", "seq")]


declare("sr_replay_opts_init", None, [ctypes.POINTER(sr_replay_opts)])
declare("sr_replay_create", ctypes.c_int, [c_vp, ctypes.POINTER(sr_replay_opts),
                                           ctypes.POINTER(c_vp)])
declare("sr_replay_destroy", None, [c_vp])
declare("sr_replay_sync", ctypes.c_int64, [c_vp])
declare("sr_replay_sample", ctypes.c_int, [c_vp, c_u32, ctypes.POINTER(sr_replay_batch)])
declare("sr_replay_update", ctypes.c_int, [c_vp, c_vp, c_vp, c_u32])
declare("sr_replay_sample_seq", ctypes.c_int, [c_vp, c_u32, c_u32,
                                               ctypes.POINTER(sr_replay_seq_batch)])
declare("sr_replay_can_insert", ctypes.c_bool, [c_vp, c_u64])


class sr_replay_info(ctypes.Structure):
    """include/stepring/replay.h; set size = ctypes.sizeof(sr_replay_info)."""
    _fields_ = [
        ("size", c_u32), ("kind", c_u32), ("inserts", c_u64), ("samples", c_u64),
        ("live", c_u64), ("total_priority", ctypes.c_double),
    ]


declare("sr_replay_info_get", ctypes.c_int, [c_vp, ctypes.POINTER(sr_replay_info)])


def replay_info(replay):
    """sr_replay_info of the sampler handle @replay (raises on error)."""
    info = sr_replay_info()
    info.size = ctypes.sizeof(info)
    check(lib.sr_replay_info_get(replay, ctypes.byref(info)), "sr_replay_info_get")
    return info


# --- checkpoints (stepring/checkpoint.h) ------------------------------------

SR_CKPT_F_BACKEND = 1 << 0
SR_CKPT_F_REPLAY = 1 << 1
SR_CKPT_F_NOWAIT = 1 << 2
CKPT_BACKENDS = {"auto": 0, "uring": 1, "pwrite": 2, "sync": 3}
SR_CKPT_STATE_IDLE = 0
SR_CKPT_STATE_SNAPSHOT = 1
SR_CKPT_STATE_WRITING = 2
SR_CKPT_STATE_FAILED = 3
CKPT_STATES = {SR_CKPT_STATE_IDLE: "idle", SR_CKPT_STATE_SNAPSHOT: "snapshot",
               SR_CKPT_STATE_WRITING: "writing", SR_CKPT_STATE_FAILED: "failed"}
SR_CKPT_SECT_POOL = 1
SR_CKPT_SECT_ENV_STATES = 2
SR_CKPT_SECT_ENV_COUNTERS = 3
SR_CKPT_SECT_STATS = 4
SR_CKPT_SECT_RUNTIME = 5
SR_CKPT_SECT_REPLAY = 6
SR_CKPT_SECT_REPLAY_META = 7
SR_CKPT_SECT_PRIORITIES = 8
SR_CKPT_SECT_USER = 64
CKPT_SECTIONS = {SR_CKPT_SECT_POOL: "pool", SR_CKPT_SECT_ENV_STATES: "env_states",
                 SR_CKPT_SECT_ENV_COUNTERS: "env_counters", SR_CKPT_SECT_STATS: "stats",
                 SR_CKPT_SECT_RUNTIME: "runtime", SR_CKPT_SECT_REPLAY: "replay",
                 SR_CKPT_SECT_REPLAY_META: "replay_meta",
                 SR_CKPT_SECT_PRIORITIES: "priorities"}


def ckpt_section_name(t):
    """The name `stepring checkpoint info` gives section type @t."""
    return "user" if t >= SR_CKPT_SECT_USER else CKPT_SECTIONS.get(t, "unknown")


class sr_ckpt_opts(ctypes.Structure):
    _fields_ = [
        ("flags", c_u32),
        ("backend", c_u32),
        ("chunk_size", c_u64),
        ("nice", c_i32),
        ("reserved0", c_u32),
    ]


class sr_ckpt_status(ctypes.Structure):
    _fields_ = [
        ("state", c_u32),
        ("backend", c_u32),
        ("result", c_i32),
        ("reserved0", c_u32),
        ("count", c_u64),
        ("bytes", c_u64),
        ("ns_snapshot", c_u64),
        ("ns_write", c_u64),
        ("replay_slots", c_u64),
        ("replay_dropped", c_u64),
    ]


class sr_ckpt_section_info(ctypes.Structure):
    _fields_ = [("type", c_u32), ("crc", c_u32), ("offset", c_u64), ("length", c_u64)]


class sr_ckpt_info(ctypes.Structure):
    _fields_ = [
        ("format_version", c_u32),
        ("n_sections", c_u32),
        ("file_size", c_u64),
        ("created_unix_ns", c_u64),
        ("build_info", ctypes.c_char * 160),
        ("env_id", ctypes.c_char * 64),
        ("num_envs", c_u32),
        ("batch_size", c_u32),
        ("obs_dim", c_u32),
        ("act_size", c_u32),
        ("state_size", c_u32),
        ("autoreset", c_u32),
        ("seed", c_u64),
        ("steps", c_u64),
        ("replay_slots", c_u64),
        ("replay_head", c_u64),
        ("sections", sr_ckpt_section_info * 32),
    ]


declare("sr_ckpt_opts_init", None, [ctypes.POINTER(sr_ckpt_opts)])
declare("sr_ckpt_backend_name", c_cp, [c_u32])
declare("sr_pool_checkpoint", ctypes.c_int, [c_vp, c_cp, ctypes.POINTER(sr_ckpt_opts)])
declare("sr_pool_checkpoint_poll", ctypes.c_int, [c_vp, ctypes.POINTER(sr_ckpt_status)])
declare("sr_pool_checkpoint_wait", ctypes.c_int, [c_vp, ctypes.POINTER(sr_ckpt_status)])
declare("sr_pool_restore", ctypes.c_int, [c_vp, c_cp])
declare("sr_checkpoint_verify", ctypes.c_int, [c_cp, ctypes.POINTER(sr_ckpt_info)])


def checkpoint_info(path):
    """Verify a checkpoint file (header, trailer, every section's CRC32C)
    and return what it says as a dict; raises on a corrupt file
    (stepring.checkpoint_info)."""
    info = sr_ckpt_info()
    check(lib.sr_checkpoint_verify(os.fsencode(path), ctypes.byref(info)))
    d = {k: getattr(info, k) for k, _ in info._fields_ if k != "sections"}
    d["build_info"] = info.build_info.decode(errors="replace")
    d["env_id"] = info.env_id.decode(errors="replace")
    d["sections"] = [{"name": ckpt_section_name(x.type),
                      "type": x.type, "offset": x.offset, "length": x.length, "crc": x.crc}
                     for x in info.sections[:info.n_sections]]
    return d


# --- devices and DLPack (stepring/device.h) ---------------------------------

SR_FIELD_OBS, SR_FIELD_REWARD, SR_FIELD_TERMINATED, SR_FIELD_TRUNCATED = 0, 1, 2, 3
SR_FIELD_FLAGS, SR_FIELD_ENV_ID, SR_FIELD_ACTION = 4, 5, 6
SR_DEVICE_F_RING = 1 << 0
SR_DEVICE_F_QUIET = 1 << 2
SR_SUBMIT_NOWAIT = 1 << 0


class sr_device_opts(ctypes.Structure):
    _fields_ = [
        ("flags", c_u32),
        ("kind", c_u32),
        ("index", c_i32),
        ("in_flight", c_u32),
        ("max_rows", c_u32),
        ("obs_dim", c_u32),
        ("act_kind", c_u32),
        ("act_dim", c_u32),
        ("ring", c_vp),
    ]


class sr_device_batch(ctypes.Structure):
    _fields_ = [
        ("n", c_u32),
        ("obs_dim", c_u32),
        ("act_size", c_u32),
        ("index", c_u32),
        ("dl_device_type", c_i32),
        ("dl_device_id", c_i32),
        ("obs", c_vp),
        ("reward", c_vp),
        ("terminated", c_vp),
        ("truncated", c_vp),
        ("flags", c_vp),
        ("env_id", c_vp),
        ("actions", c_vp),
        ("first_seq", c_u64),
        ("stream", c_vp),
    ]


_PDB = ctypes.POINTER(sr_device_batch)
declare("sr_device_opts_init", None, [ctypes.POINTER(sr_device_opts)])
declare("sr_device_cuda_available", ctypes.c_bool, [ctypes.c_int])
declare("sr_device_open", ctypes.c_int, [ctypes.POINTER(sr_device_opts), ctypes.POINTER(c_vp)])
declare("sr_device_close", None, [c_vp])
declare("sr_device_submit", ctypes.c_int, [c_vp, _PBATCH, ctypes.c_uint, ctypes.POINTER(_PDB)])
declare("sr_device_batch_dlpack", ctypes.c_int, [_PDB, ctypes.c_int, ctypes.POINTER(c_vp)])
declare("sr_device_release", ctypes.c_int, [c_vp, _PDB])
declare("sr_ring_dlpack", ctypes.c_int, [c_vp, ctypes.c_int, c_u64, c_u32, ctypes.POINTER(c_vp)])

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [c_vp, c_cp, c_vp]


def dlpack_capsule(managed):
    """Wrap a DLManagedTensor* in a "dltensor" PyCapsule for
    torch.utils.dlpack.from_dlpack, which takes ownership (it calls the
    tensor's deleter when the tensor dies)."""
    return _capsule_new(managed, b"dltensor", None)


def pool_info(pool):
    """sr_pool_info of the pool handle @pool (raises on error)."""
    info = sr_pool_info()
    info.size = ctypes.sizeof(info)
    check(lib.sr_pool_info_get(pool, ctypes.byref(info)), "sr_pool_info_get")
    return info


def env_params(spec):
    """The parameters of env spec @spec (an sr_env_spec or a pointer to one,
    e.g. a pool's sr_pool_info.spec), in the library's order, as
    {name: (value, flags, note)}: sr_env_param_at."""
    out = {}
    p = sr_env_param()
    ref = spec if isinstance(spec, ctypes._Pointer) else ctypes.byref(spec)
    i = 0
    while lib.sr_env_param_at(ref, i, ctypes.byref(p)) == 0:
        out[p.name.decode()] = (p.value, p.flags, p.note.decode() if p.note else None)
        i += 1
    return out


def ring_info(ring):
    """sr_ring_info of the ring handle @ring (raises on error)."""
    info = sr_ring_info()
    info.size = ctypes.sizeof(info)
    check(lib.sr_ring_info_get(ring, ctypes.byref(info)), "sr_ring_info_get")
    return info
