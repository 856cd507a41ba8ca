"""VectorEnv: a stepring pool behind Gymnasium's vector-env API.

When gymnasium is importable, VectorEnv is a subclass of
gymnasium.vector.VectorEnv: its spaces are Gymnasium's own classes,
metadata["autoreset_mode"] is a gymnasium.vector.AutoresetMode, and every
wrapper of gymnasium.wrappers.vector accepts it. Without gymnasium, the same
class stands alone with stepring.spaces (same attribute names).

Copies (as SyncVectorEnv's `copy` argument): by default step() and reset()
return arrays that belong to the caller (writable, never overwritten later,
float64 rewards as Gymnasium gives). copy=False returns zero-copy views of
the memory the C pool hands back (the ring's columns): read-only, float32
rewards, valid until the ring laps them (see docs/python.md). Either way the
views hold a reference to the pool, so memory stays mapped while any view is
alive, even after close(): reading a stale view is wrong but never crashes.

Threads: an env is driven from one thread at a time. Every call holds the
env's lock for its whole length (and a reference to the pool, so a close
cannot free it underneath); a second thread calling in meanwhile gets
stepring.BusyError at once, never a crash or a deadlock.
"""
import ctypes
import errno
import functools
import os
import threading

import numpy as np

from . import _lib
from ._lib import lib, check
from ._placement import caller_unplaced
from ._utils import (_gym, _AUTORESET, _BIND, _DEVICE, U32, U64, ClosedError, _as_count, _as_int,
                     _as_seed, _autoreset_name, _batch_space, _check_reset_mask, _fspath,
                     _metadata_mode, _reset_seeds, _rng_is_numpy, _spec_spaces, _values_per_env)
from .replay import Replay

_Base = _gym.vector.VectorEnv if _gym is not None else object

_DEFAULT = object()  # "not given" (None means something for max_episode_steps)


class _PoolHandle:
    """Owns one sr_pool*. Destroyed when the env is closed and no view of
    its memory is alive any more (views keep the handle as their owner)."""

    __slots__ = ("ptr", "__weakref__")

    def __init__(self, ptr):
        self.ptr = ptr

    def destroy(self):
        p, self.ptr = self.ptr, None
        if p:
            lib.sr_pool_destroy(p)

    def __del__(self):
        self.destroy()

    def __reduce_ex__(self, protocol):
        raise TypeError("a stepring pool cannot be pickled or copied")

    def __deepcopy__(self, memo):
        raise TypeError("a stepring pool cannot be pickled or copied")

    __copy__ = __deepcopy__


class _DeviceHandle:
    """Owns an sr_device (and keeps the pool, whose ring it registered,
    alive until it is closed)."""

    def __init__(self, ptr, pool):
        self.ptr = ptr
        self.pool = pool

    def close(self):
        p, self.ptr = self.ptr, None
        if p:
            lib.sr_device_close(p)
        self.pool = None

    def __del__(self):
        self.close()


def _buffer(addr, nbytes, owner):
    """A ctypes byte array over [addr, addr + nbytes) that keeps @owner alive."""
    buf = (ctypes.c_uint8 * nbytes).from_address(addr)
    buf._sr_owner = owner
    return buf


class _Column:
    """Turns the C pointers of one batch field into numpy views.

    A pointer inside a known region (a ring column) becomes a slice of a
    numpy array over the whole region: one slice per step, no allocation of
    a buffer object. Other pointers (a collector's host buffer) get a view
    cached by (address, rows)."""

    __slots__ = ("dtype", "width", "rowbytes", "regions", "cache", "owner", "writeable")

    def __init__(self, dtype, width, owner, writeable=False):
        self.dtype = np.dtype(dtype)
        self.width = width  # items per row; 0 means a 1-D column
        self.rowbytes = self.dtype.itemsize * max(width, 1)
        self.regions = []
        self.cache = {}
        self.owner = owner
        self.writeable = writeable

    def _wrap(self, addr, rows):
        arr = np.frombuffer(_buffer(addr, rows * self.rowbytes, self.owner), dtype=self.dtype)
        if self.width:
            arr = arr.reshape(rows, self.width)
        # Read-only by default: writing into a view would write into the
        # ring, i.e. into the replay window other readers see.
        arr.flags.writeable = self.writeable
        return arr

    def add_region(self, addr, rows):
        if not addr or rows <= 0:
            return
        self.regions.append((addr, addr + rows * self.rowbytes, self._wrap(addr, rows)))

    def view(self, addr, n):
        if not addr:
            return None
        rb = self.rowbytes
        for lo, hi, arr in self.regions:
            if lo <= addr and addr + n * rb <= hi:
                off = addr - lo
                if off % rb == 0:
                    r = off // rb
                    return arr[r:r + n]
        key = (addr, n)
        v = self.cache.get(key)
        if v is None:
            if len(self.cache) > 256:
                self.cache.clear()
            v = self._wrap(addr, n)
            self.cache[key] = v
        return v


class EnvSpec:
    """What Gymnasium's EnvSpec says that stepring knows: id, name,
    max_episode_steps. (gymnasium.make_vec replaces it by Gymnasium's own
    EnvSpec of the registered id.)"""

    def __init__(self, spec):
        self.id = spec.id.decode()
        self.name = spec.name.decode()
        self.max_episode_steps = spec.max_episode_steps or None

    def __repr__(self):
        return "EnvSpec(id=%r, max_episode_steps=%r)" % (self.id, self.max_episode_steps)


def _exclusive(fn):
    """Run method @fn holding the env's lock (BusyError if another thread
    holds it)."""
    @functools.wraps(fn)
    def wrapper(self, *a, **kw):
        lk = self._lock
        if not lk.acquire(False):
            raise self._busy(fn.__name__)
        try:
            return fn(self, *a, **kw)
        finally:
            lk.release()
    return wrapper


class VectorEnv(_Base):
    """num_envs instances of one env type stepped by a stepring pool.

    Use stepring.make_vec() (or gymnasium.make_vec("stepring/<id>", ...))
    to build one. A gymnasium.vector.VectorEnv when gymnasium is
    importable: reset() -> (obs, info), step(actions) -> (obs, reward,
    terminated, truncated, info), close(), context manager, autoreset
    modes, infos and copies as SyncVectorEnv gives them for the same envs.
    In async mode step() is send() then recv() and info['env_id'] says
    which envs the rows are.
    """

    metadata = {"autoreset_mode": _metadata_mode("next_step"), "render_modes": []}
    render_mode = None
    spec = None
    closed = False
    _dev = None
    _default_replay = None
    _handle = None
    _lock = None

    def __init__(self, env_id, num_envs=1, *, mode="sync", batch_size=None, num_threads=None,
                 seed=None, autoreset_mode="next_step", device="cpu", replay_capacity=None,
                 copy=True, output="numpy", bind="core", cpuset=None, ring_name=None,
                 max_episode_steps=_DEFAULT,
                 render_mode=None, comm=None, check_finite=None):
        self._handle = None
        self._p = None
        self._lock = threading.Lock()
        self.closed = True
        if mode not in ("sync", "async"):
            raise ValueError("mode must be 'sync' or 'async', not %r" % (mode,))
        autoreset_mode = _autoreset_name(autoreset_mode)
        if device not in _DEVICE:
            raise ValueError("device must be 'cpu' or 'cuda', not %r" % (device,))
        if output not in ("numpy", "torch", "dlpack"):
            raise ValueError("output must be 'numpy', 'torch' or 'dlpack', not %r" % (output,))
        if bind not in _BIND:
            raise ValueError("bind must be one of %s, not %r" % (", ".join(_BIND), bind))
        if render_mode is not None:
            raise NotImplementedError("stepring envs do not render: render_mode must be None, "
                                      "not %r" % (render_mode,))
        num_envs = _as_count("num_envs", num_envs)
        # With an MPI communicator num_envs (and an async batch_size) are
        # global: this rank gets its block of envs (see _mpi_share).
        self._comm = comm
        self.global_num_envs, self.first_env, self.rank, self.world_size = num_envs, 0, 0, 1
        if comm is not None:
            num_envs, batch_size = self._mpi_share(comm, num_envs, mode, batch_size)
        if mode == "sync":
            if batch_size is not None and _as_count("batch_size", batch_size) != num_envs:
                raise ValueError("sync mode steps every env: batch_size must be None or "
                                 "num_envs (%d), not %r; use mode='async'" % (num_envs, batch_size))
            batch_size = num_envs
        else:
            if batch_size is None:
                batch_size = max(1, num_envs // 2)
            batch_size = _as_count("batch_size", batch_size)
            if batch_size >= num_envs:
                raise ValueError("async mode needs batch_size < num_envs (got batch_size %d, "
                                 "num_envs %d)" % (batch_size, num_envs))
        if seed is not None:
            seed = _as_seed("seed", seed)
        if device == "cuda":
            output = "dlpack"  # a GPU batch can only come out as a tensor
        self._env_name = os.fspath(env_id) if isinstance(env_id, os.PathLike) else str(env_id)
        self.num_envs = num_envs
        self.batch_size = batch_size
        self.mode = mode
        self.autoreset_mode = autoreset_mode
        self.device = device
        self.output = output
        self.copy = bool(copy)
        self.metadata = {"autoreset_mode": _metadata_mode(autoreset_mode), "render_modes": []}
        self._num_threads = 0 if num_threads is None else _as_count("num_threads", num_threads,
                                                                       U32)
        self._replay_capacity = 0 if replay_capacity is None else \
            _as_int("replay_capacity", replay_capacity, 0, U64, "a non-negative int")
        self._max_steps = max_episode_steps if max_episode_steps is _DEFAULT else \
            (0 if max_episode_steps is None else
             _as_int("max_episode_steps", max_episode_steps, 1, U32, "a positive int or None"))
        self._bind = _BIND[bind]
        self._cpuset = cpuset
        self._ring_name = ring_name
        if check_finite is not None and not isinstance(check_finite, (bool, np.bool_)):
            raise TypeError("check_finite must be None, True or False, not %r"
                            % (check_finite,))
        self._check_finite = check_finite
        self._seed = seed
        self._async = mode == "async"
        self._same_step = autoreset_mode == "same_step"
        self._disabled = autoreset_mode == "disabled"
        self._torch = output == "torch"
        self._dlpack = output == "dlpack"
        self._dev = None
        self._c_step = lib.sr_pool_step
        self._bp = ctypes.POINTER(_lib.sr_batch)()
        self._bpref = ctypes.byref(self._bp)
        self._ended = np.zeros(num_envs, bool)  # disabled mode: ended, not reset since
        self._create(seed)

        spec = _lib.pool_info(self._handle.ptr).spec.contents
        self.spec = EnvSpec(spec)
        self._discrete = spec.act_kind == _lib.SR_SPACE_DISCRETE
        self._act_dim = spec.act_dim
        self._obs_shape = tuple(spec.obs_shape[i] for i in range(spec.obs_ndim))
        self.single_observation_space, self.single_action_space = _spec_spaces(spec)
        self.observation_space = _batch_space(self.single_observation_space, batch_size)
        self.action_space = _batch_space(self.single_action_space, batch_size)
        if seed is not None:
            self.single_action_space.seed(seed)
            self.action_space.seed(seed)

    # --- pool lifecycle --------------------------------------------------

    def _mpi_share(self, comm, num_envs, mode, batch_size):
        """This rank's envs of a run of num_envs across comm's ranks, and
        its async batch (the C library's rule: batch_size x local / global,
        at least 1, below the local count)."""
        size, rank = int(comm.Get_size()), int(comm.Get_rank())
        first, n = _lib.c_u64(), _lib.c_u32()
        check(lib.sr_mpi_env_range(num_envs, size, rank, ctypes.byref(first), ctypes.byref(n)))
        self.first_env, self.rank, self.world_size = int(first.value), rank, size
        n = int(n.value)
        self._global_batch = 0
        if mode == "async":
            gb = max(1, num_envs // 2) if batch_size is None else _as_count("batch_size",
                                                                             batch_size)
            if gb >= num_envs:
                raise ValueError("async mode needs batch_size < num_envs (got batch_size %d, "
                                 "num_envs %d)" % (gb, num_envs))
            self._global_batch = gb
            b = max(1, gb * n // num_envs)
            batch_size = b if b < n else max(1, n - 1)
            if batch_size >= n:
                raise ValueError("async mode across ranks needs at least 2 envs per rank "
                                 "(rank %d has %d)" % (rank, n))
        return n, batch_size

    def _mpi_create(self, o):
        """Create this rank's part collectively (every rank checks every
        rank's options and gets the same error), then keep its pool."""
        o.num_envs = self.global_num_envs
        o.batch_size = self._global_batch
        mp = ctypes.c_void_p()
        check(lib.sr_mpi_pool_create_f(int(self._comm.py2f()), ctypes.byref(o), None,
                                       ctypes.byref(mp)))
        info = _lib.sr_mpi_pool_info()
        lib.sr_mpi_pool_info_get(mp, ctypes.byref(info))
        self.mpi_info = {k: getattr(info, k) for k, _ in info._fields_}
        self.mpi_info["cpus"] = info.cpus.decode()
        return lib.sr_mpi_pool_detach(mp)

    def _env_spec(self):
        """The env spec to create the pool from: a plugin (a path to a
        shared object) or a built-in id, with max_episode_steps applied."""
        name = self._env_name
        s = _lib.sr_env_spec()
        if name.endswith(".so") or os.sep in name:
            check(lib.sr_env_load_plugin(os.fsencode(name), ctypes.byref(s)))
        elif self._max_steps is _DEFAULT:
            return None
        else:
            check(lib.sr_env_find(name.encode(), ctypes.byref(s)))
        if self._max_steps is not _DEFAULT:
            s.max_episode_steps = self._max_steps
        return s

    def _create(self, seed):
        o = _lib.sr_pool_opts()
        lib.sr_pool_opts_init(ctypes.byref(o))
        self._name_b = self._env_name.encode()
        o.env = self._name_b
        self._spec_c = self._env_spec()
        if self._spec_c is not None:
            o.spec = ctypes.pointer(self._spec_c)
        o.num_envs = self.num_envs
        o.num_threads = self._num_threads
        o.batch_size = self.batch_size
        if seed is not None:
            o.flags |= _lib.SR_POOL_F_SEED
            o.seed = seed
        o.autoreset = _AUTORESET[self.autoreset_mode]
        o.bind = self._bind
        if self._cpuset is not None:
            self._cpuset_b = str(self._cpuset).encode()
            o.flags |= _lib.SR_POOL_F_CPUSET
            o.cpuset = self._cpuset_b
        if self._ring_name is not None:
            self._ring_name_b = str(self._ring_name).encode()
            o.flags |= _lib.SR_POOL_F_RING_NAME
            o.ring_name = self._ring_name_b
        if self._check_finite is not None:
            o.flags |= (_lib.SR_POOL_F_CHECK_FINITE if self._check_finite
                        else _lib.SR_POOL_F_NO_CHECK_FINITE)
        o.ring_capacity = self._replay_capacity
        # The pool's batches stay on the host (views of the ring); with
        # output 'dlpack' an sr_device lands them where asked (below).
        o.device = _lib.SR_DEVICE_HOST
        ptr = ctypes.c_void_p()
        if self._comm is not None:
            ptr.value = self._mpi_create(o)
        else:
            with caller_unplaced():  # the plan reads this thread's own CPUs
                check(lib.sr_pool_create(ctypes.byref(o), ctypes.byref(ptr)))
        self._handle = _PoolHandle(ptr.value)
        self.closed = False
        self._seed = seed
        # Without a seed the library seeds with 0 (deterministic: unlike
        # SyncVectorEnv's envs, which draw random seeds).
        self._set_seeds(0 if seed is None else seed, None, None)
        self._ended[:] = False
        self._setup_views()
        if self._dlpack:
            self._open_device()

    def _setup_views(self):
        h = self._handle
        spec = _lib.pool_info(h.ptr).spec.contents
        d = int(spec.obs_dim)
        # torch.from_numpy wants writeable arrays (copies are anyway)
        w = self.output == "torch" and not self.copy
        self._c_obs = _Column(np.float32, d, h, w)
        self._c_fobs = _Column(np.float32, d, h, w)
        self._c_rew = _Column(np.float32, 0, h, w)
        self._c_term = _Column(np.bool_, 0, h, w)
        self._c_trunc = _Column(np.bool_, 0, h, w)
        self._c_id = _Column(np.uint32, 0, h, w)
        self._vcache = {}
        self._ring = _lib.pool_info(h.ptr).ring
        if self._ring:
            r = self._ring
            cap = int(lib.sr_ring_capacity(r))
            cols = (("sr_ring_obs_col", self._c_obs), ("sr_ring_obs_col", self._c_fobs),
                    ("sr_ring_reward_col", self._c_rew),
                    ("sr_ring_terminated_col", self._c_term),
                    ("sr_ring_truncated_col", self._c_trunc),
                    ("sr_ring_env_id_col", self._c_id))
            for fn, col in cols:
                col.add_region(getattr(lib, fn)(r), cap)
        # Actions go through one buffer owned by the env: its address is
        # known once (asking numpy for an array's address costs more than
        # copying a few KiB), and it converts dtypes on the way in.
        if spec.act_kind == _lib.SR_SPACE_DISCRETE:
            self._abuf = np.zeros(self.num_envs, np.int32)
            self._ashape = (self.batch_size,)
        else:
            self._abuf = np.zeros((self.num_envs, spec.act_dim), np.float32)
            self._ashape = (self.batch_size, spec.act_dim)
        self._adtype = self._abuf.dtype
        # c_void_p objects: ctypes passes them without converting an int.
        self._aptr = ctypes.c_void_p(self._abuf.ctypes.data)
        self._p = ctypes.c_void_p(h.ptr)
        self._ids = np.zeros(self.num_envs, np.uint32)
        self._ids_ptr = self._ids.ctypes.data

    def _open_device(self):
        spec = _lib.pool_info(self._handle.ptr).spec.contents
        o = _lib.sr_device_opts()
        lib.sr_device_opts_init(ctypes.byref(o))
        o.kind = _DEVICE[self.device]
        o.index = 0
        o.flags |= _lib.SR_DEVICE_F_RING
        o.ring = self._ring
        # Each step exports tensors that keep their device batch alive: many
        # in flight, and NOWAIT submits, so that holding tensors never
        # blocks a step (it raises instead).
        o.in_flight = 8
        o.max_rows = self.batch_size
        o.obs_dim = spec.obs_dim
        o.act_kind = spec.act_kind
        o.act_dim = spec.act_dim
        d = ctypes.c_void_p()
        check(lib.sr_device_open(ctypes.byref(o), ctypes.byref(d)),
              "device %r" % self.device)
        self._dev = _DeviceHandle(d.value, self._handle)
        self._dbp = ctypes.POINTER(_lib.sr_device_batch)()

    def _dlpack_batch(self):
        """Submit the pool's batch to the device; export its columns as
        torch tensors through DLPack; release the batch (it is recycled when
        the tensors die)."""
        import torch.utils.dlpack as tdl
        dev = self._dev.ptr
        rc = lib.sr_device_submit(dev, self._bp, _lib.SR_SUBMIT_NOWAIT, ctypes.byref(self._dbp))
        if rc < 0:
            if rc == -errno.EAGAIN:
                raise _lib.TryAgainError(rc, "every device batch is still held by live tensors "
                                         "from earlier steps: clone() what you keep")
            raise _lib.error_for(rc)
        out = []
        try:
            fields = [_lib.SR_FIELD_OBS, _lib.SR_FIELD_REWARD, _lib.SR_FIELD_TERMINATED,
                      _lib.SR_FIELD_TRUNCATED]
            if self._async:
                fields.append(_lib.SR_FIELD_ENV_ID)
            for f in fields:
                m = ctypes.c_void_p()
                check(lib.sr_device_batch_dlpack(self._dbp, f, ctypes.byref(m)))
                out.append(tdl.from_dlpack(_lib.dlpack_capsule(m.value)))
        finally:
            lib.sr_device_release(dev, self._dbp)
        obs = out[0]
        if len(self._obs_shape) != 1:
            obs = obs.reshape((obs.shape[0],) + self._obs_shape)
        info = {}
        if self._async:
            info["env_id"] = out[4].long()
        term, trunc = out[2].bool(), out[3].bool()
        if self._bp.contents.nonfinite:
            # Rows the pool flagged SR_SLOT_NONFINITE: exactly these.
            import torch
            info["nonfinite"] = ~(torch.isfinite(obs.reshape(obs.shape[0], -1)).all(dim=1)
                                  & torch.isfinite(out[1]))
        if self._same_step:
            b = self._bp.contents
            if b.final_obs:
                import torch
                fo = torch.from_numpy(self._c_fobs.view(b.final_obs, b.n).copy())
                if len(self._obs_shape) != 1:
                    fo = fo.reshape((b.n,) + self._obs_shape)
                info["final_obs"] = fo.to(obs.device)
                info["_final_obs"] = term | trunc
        return obs, out[1], term, trunc, info

    def _live(self):
        """The pool pointer; ClosedError (a RuntimeError) once closed."""
        h = self._handle
        if h is None or h.ptr is None or self.closed:
            raise ClosedError()
        return h.ptr

    def _set_seeds(self, seed, seeds, mask):
        """Record each env's seed, as np_random_seed reports it: with
        rng=numpy the seed Gymnasium's env would have been reset with (int
        seed s: s + global index; a list: its entry), else the (seed,
        index) pair the instance RNG was seeded from. None entries of a
        list and envs outside @mask keep theirs."""
        if not hasattr(self, "_env_seeds"):
            self._env_seeds = [-1] * self.num_envs
        np_seeds = _rng_is_numpy(self._env_name)
        for i in range(self.num_envs):
            if mask is not None and not mask[i]:
                continue
            if seeds is not None:
                if seeds[i] is not None:
                    self._env_seeds[i] = seeds[i] if np_seeds else (seeds[i], 0)
            elif seed is not None:
                g = self.first_env + i
                self._env_seeds[i] = seed + g if np_seeds else (seed, g)

    def _busy(self, what):
        return _lib.BusyError(
            "stepring: %s() while another thread is inside a call on this env; an env is "
            "driven from one thread at a time (give each thread its own env)" % what)

    def close(self, **kwargs):
        """Stop the workers and free the pool (deferred while views of its
        memory are alive). Safe to call twice. From another thread while a
        call runs: BusyError (nothing is freed under a running call)."""
        if self.closed:
            return
        lk = self._lock
        if lk is None:
            return
        if not lk.acquire(False):
            raise self._busy("close")
        try:
            self._close_locked()
        finally:
            lk.release()

    def _close_locked(self):
        if self.closed:
            return
        self.closed = True
        self._p = None
        d, self._dev = self._dev, None
        if d is not None:
            d.close()
        h, self._handle = self._handle, None
        for c in ("_c_obs", "_c_fobs", "_c_rew", "_c_term", "_c_trunc", "_c_id"):
            setattr(self, c, None)
        self._vcache = None
        r, self._default_replay = getattr(self, "_default_replay", None), None
        if r is not None:
            r.close()
        # Dropping our reference to h frees the pool now, or when the last
        # view of its memory goes (each view's buffer holds h).
        del h

    def close_extras(self, **kwargs):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # No call can be running: it would hold a reference to self.
        try:
            if self._lock is not None:
                self._close_locked()
        except Exception:
            pass

    def __reduce_ex__(self, protocol):
        raise TypeError("a stepring VectorEnv cannot be pickled or copied: it owns C threads "
                        "and shared memory; make a new one with the same arguments (and "
                        "checkpoint()/restore() to carry the env states over)")

    def __deepcopy__(self, memo):
        self.__reduce_ex__(2)

    def __copy__(self):
        self.__reduce_ex__(2)

    @property
    def unwrapped(self):
        return self

    @property
    def num_threads(self):
        return int(_lib.pool_info(self._live()).num_threads)

    @property
    def threads_note(self):
        """How num_threads was chosen (the default comes from the work:
        num_envs x the env's measured step cost), e.g. "1 (default: 8 envs x
        23 ns a step = 0.2 us a batch; ...)"."""
        return (_lib.pool_info(self._live()).threads_note or b"").decode()

    @property
    def batch_groups(self):
        """Async: how many fixed batch groups the envs form (step() then
        cycles through them), 0 when batch_size does not tile num_envs (or
        is below the thread count) and in sync mode."""
        return int(_lib.pool_info(self._live()).batch_groups)

    def worker_cpus(self):
        """The CPU each worker thread is bound to, None where it is not bound
        to one (bind numa or none; worker 0 is this thread, which the pool
        does not bind): for placing the trainer's own threads elsewhere."""
        out = []
        for w in range(self.num_threads):
            ws = _lib.sr_pool_worker_stats()
            _lib.check(lib.sr_pool_worker_stats_get(self._live(), w, ctypes.byref(ws)),
                       "sr_pool_worker_stats_get")
            out.append(None if ws.cpu == -errno.ENOENT else int(ws.cpu))
        return out

    # --- batches -----------------------------------------------------------

    def _batch(self):
        if self._dlpack:
            return self._dlpack_batch()
        b = self._bp.contents
        n = b.n
        key = (b.obs, b.reward, n)
        out = self._vcache.get(key)
        if out is None:
            out = self._views(b, n)
            if len(self._vcache) >= 4096:
                self._vcache.clear()
            self._vcache[key] = out
        obs, rew, term, trunc = out
        bad = None
        if b.nonfinite:
            # Rows the pool flagged SR_SLOT_NONFINITE: exactly these.
            bad = ~(np.isfinite(obs.reshape(n, -1)).all(axis=1) & np.isfinite(rew))
        if self.copy:
            obs = obs.copy()
            rew = rew.astype(np.float64)
            term = term.copy()
            trunc = trunc.copy()
        info = {}
        if self._async:
            info["env_id"] = self._c_id.view(b.env_id, n).copy() if self.copy else \
                self._c_id.view(b.env_id, n)
        if self._same_step and b.final_obs:
            done = term | trunc
            if done.any():
                # As SyncVectorEnv: an object array of the ended envs' last
                # obs, the mask, and their (empty) final infos.
                fo = self._c_fobs.view(b.final_obs, n)
                arr = np.full(n, None, dtype=object)
                for i in np.flatnonzero(done):
                    arr[i] = fo[i].reshape(self._obs_shape).copy()
                info["final_obs"] = arr
                info["_final_obs"] = done
                info["final_info"] = {}
                info["_final_info"] = done.copy()
        if bad is not None:
            info["nonfinite"] = bad
        if self._disabled:
            np.logical_or(term, trunc, out=self._ended)
        if self._torch:
            import torch
            obs, rew, term, trunc = (torch.from_numpy(x) for x in (obs, rew, term, trunc))
            if bad is not None:
                info["nonfinite"] = torch.from_numpy(bad)
            if "env_id" in info:
                info["env_id"] = torch.from_numpy(info["env_id"].astype(np.int64))
        return obs, rew, term, trunc, info

    def _views(self, b, n):
        """(obs, reward, terminated, truncated) over batch @b's memory."""
        obs = self._c_obs.view(b.obs, n)
        if len(self._obs_shape) != 1:
            obs = obs.reshape((n,) + self._obs_shape)
        return (obs, self._c_rew.view(b.reward, n), self._c_term.view(b.terminated, n),
                self._c_trunc.view(b.truncated, n))

    def _actions(self, actions, n):
        """Copy @actions (n of them) into the action buffer; returns its
        address. Checks what the C side cannot see: NaN and non-integers
        in a discrete float array, integers beyond int32, the count."""
        a = actions
        buf = self._abuf
        if type(a) is np.ndarray and a.dtype is self._adtype and n == self.batch_size \
                and a.shape == self._ashape:
            buf[:n] = a
            return self._aptr
        if _is_torch(a):
            a = a.detach().cpu().numpy()
        a = np.asarray(a)
        if a.ndim == 0:
            # SyncVectorEnv iterates over the actions: a scalar is a TypeError.
            raise _lib.InvalidTypeError("expected %d actions, got a scalar (%r): nothing was "
                                        "stepped" % (n, actions))
        if self._discrete:
            if a.dtype.kind == "f":
                if not np.all(np.isfinite(a)):
                    raise _lib.InvalidArgumentError(
                        -22, "actions contain NaN or inf: nothing was stepped")
                if np.any(a != np.floor(a)):
                    raise _lib.InvalidArgumentError(
                        -22, "discrete actions must be integers: nothing was stepped")
            elif a.dtype.kind not in "iub":
                raise _lib.InvalidArgumentError(
                    -22, "discrete actions must be integers, not %s" % a.dtype)
            if a.size and (a.min() < -2**31 or a.max() >= 2**31):
                raise _lib.InvalidArgumentError(-22, "action out of range: nothing was stepped")
            if a.size != n:
                raise _lib.InvalidArgumentError(
                    -22, "expected %d actions, got an array of shape %s" % (n, a.shape))
            buf[:n] = a.reshape(n)
        else:
            if a.dtype.kind not in "fiub":
                raise _lib.InvalidArgumentError(-22, "box actions must be numbers, not %s"
                                                % a.dtype)
            if a.size != n * self._act_dim:
                raise _lib.InvalidArgumentError(
                    -22, "expected %d actions of %d floats, got an array of shape %s"
                    % (n, self._act_dim, a.shape))
            # NaN and inf are refused by the C side; finite values outside
            # the bounds are clipped by the env (as Gymnasium's are). A value
            # beyond float32's range would become inf: clip it first.
            a = a.reshape(n, self._act_dim)
            if a.dtype.itemsize > 4 or a.dtype.kind in "iu":
                fmax = np.finfo(np.float32).max
                a = np.clip(a, -fmax, fmax) if np.isfinite(a).all() else a
            buf[:n] = a
        return self._aptr

    # --- Gymnasium API -----------------------------------------------------

    @_exclusive
    def reset(self, *, seed=None, options=None):
        """Reset every env (or those of options['reset_mask']).

        seed: None (continue each env's RNG), an int s (env i starts from
        (s, i), exactly as make_vec(seed=s) would: with rng='numpy', as
        Gymnasium's env after reset(seed=s + i)), or a list of num_envs
        ints or None (env i seeded from (seed[i], 0), so equal seeds give
        equal envs as in Gymnasium; None leaves that env's RNG alone).
        options: 'reset_mask' (a numpy bool array of num_envs with some env
        set, as SyncVectorEnv checks it: reset only those envs, sync mode)
        and the env's own reset options as Gymnasium's
        classic-control envs take them ('low'/'high'; Pendulum 'x_init'/
        'y_init'). Returns (obs, info)."""
        self._live()
        opts = dict(options) if options else {}
        mask = opts.pop("reset_mask", None)
        seed, seeds = _reset_seeds(seed, self.num_envs)
        env_opts = None
        if opts:
            parts = []
            for k, v in opts.items():
                if not isinstance(k, str) or not k.isidentifier():
                    raise ValueError("reset option names are strings, not %r" % (k,))
                if isinstance(v, (bool, np.bool_)) or not isinstance(
                        v, (int, float, np.integer, np.floating)):
                    raise ValueError("reset option %r must be a number, not %r" % (k, v))
                parts.append("%s=%r" % (k, float(v)))
            env_opts = ",".join(parts).encode()
        m = None
        if mask is not None:
            m = _check_reset_mask(mask, self.num_envs)
            if self.mode != "sync":
                raise ValueError("reset_mask needs mode='sync'")
            m = m.astype(np.uint8)
        if seed is not None and self._async:
            # An async pool reseeds by being made anew (the C reset only
            # reseeds sync pools).
            if seeds is not None or env_opts is not None or m is not None:
                raise ValueError("async mode: reset takes one int seed and no options")
            self._close_locked()
            self._create(seed)
        elif seeds is not None or env_opts is not None or (seed is not None) or m is not None:
            if self._async:
                raise ValueError("async mode: reset takes one int seed and no options")
            self._reset_ex(m, seed, seeds, env_opts)
        if seeds is not None or seed is not None:
            self._set_seeds(seed, seeds, m)
        if seed is not None:
            self._seed = seed
            self.single_action_space.seed(seed)
            self.action_space.seed(seed)
            if _gym is not None:
                from gymnasium.utils import seeding
                self._np_random, self._np_random_seed = seeding.np_random(seed)
        p = self._live()
        if m is None and seeds is None and env_opts is None and seed is None:
            check(lib.sr_pool_reset(p, self._bpref))
            if self._async:
                check(lib.sr_pool_recv(p, self._bpref))
        ended = self._ended.copy()
        obs, _, _, _, info = self._batch()
        if m is not None:
            ended[m.astype(bool)] = False
            self._ended[:] = ended
        else:
            self._ended[:] = False
        return obs, info

    def _reset_ex(self, mask, seed, seeds, env_opts):
        p = self._live()
        o = _lib.sr_pool_reset_opts()
        lib.sr_pool_reset_opts_init(ctypes.byref(o))
        keep = []
        if mask is not None:
            o.flags |= _lib.SR_RESET_F_MASK
            o.mask = mask.ctypes.data
        if seed is not None:
            o.flags |= _lib.SR_RESET_F_SEED
            o.seed = seed
        if seeds is not None:
            sv = np.array([0 if s is None else s for s in seeds], dtype=np.uint64)
            sm = np.array([s is not None for s in seeds], dtype=np.uint8)
            keep += [sv, sm]
            o.flags |= _lib.SR_RESET_F_SEEDS
            o.seeds = sv.ctypes.data
            o.seed_mask = sm.ctypes.data
        if env_opts is not None:
            o.flags |= _lib.SR_RESET_F_OPTIONS
            o.options = env_opts
        check(lib.sr_pool_reset_ex(p, ctypes.byref(o), self._bpref))
        del keep

    def step(self, actions):
        """Sync: step every env with num_envs actions. Async: send actions to
        the envs of the last batch, then wait for the next batch.
        Returns (obs, reward, terminated, truncated, info)."""
        lk = self._lock
        if not lk.acquire(False):
            raise self._busy("step")
        try:
            # h keeps the pool alive for the whole call.
            h = self._handle
            if h is None or self.closed:
                raise ClosedError()
            if self._async:
                self._send(actions, None)
                check(lib.sr_pool_recv(h.ptr, self._bpref))
                return self._batch()
            if self._disabled and self._ended.any():
                raise _lib.ResetNeededError(
                    "autoreset_mode='disabled': envs %s ended and were not reset; reset them "
                    "with reset(options={'reset_mask': mask}) before stepping"
                    % np.flatnonzero(self._ended).tolist())
            # The common case inline (this is the per-step cost of the
            # binding): int32/float32 actions of the right shape.
            a = actions
            if type(a) is np.ndarray and a.dtype is self._adtype and a.shape == self._ashape:
                self._abuf[:] = a
                ptr = self._aptr
            else:
                ptr = self._actions(actions, self.num_envs)
            rc = self._c_step(self._p, ptr, self._bpref)
            if rc < 0:
                raise _lib.error_for(rc)
            return self._batch()
        finally:
            lk.release()

    @_exclusive
    def send(self, actions, env_id=None):
        """Async: hand actions to envs env_id (default: the envs of the last
        batch) and return at once."""
        self._send(actions, env_id)

    def _send(self, actions, env_id):
        p = self._live()
        if self.mode != "async":
            raise RuntimeError("send/recv need mode='async' (this env is sync: use step)")
        ids = None
        n = self.batch_size
        if env_id is not None:
            e = np.asarray(env_id)
            if e.dtype.kind not in "iu" or e.ndim > 1 or (e.size and e.min() < 0) or \
                    (e.size and e.max() >= self.num_envs):
                raise _lib.InvalidArgumentError(-22, "env_id must be env indices in [0, %d), "
                                                "not %r" % (self.num_envs, env_id))
            n = e.size
            if n > self.num_envs or n == 0:
                raise _lib.InvalidArgumentError(-22, "send: %d env ids for %d envs"
                                                % (n, self.num_envs))
            self._ids[:n] = e.reshape(n)
            ids = self._ids_ptr
        check(lib.sr_pool_send(p, self._actions(actions, n), ids, n))

    @_exclusive
    def recv(self):
        """Async: wait for batch_size envs whose step finished."""
        p = self._live()
        if self.mode != "async":
            raise RuntimeError("send/recv need mode='async' (this env is sync: use step)")
        check(lib.sr_pool_recv(p, self._bpref))
        return self._batch()

    def render(self):
        raise NotImplementedError(
            "stepring envs do not render (render_mode None only; no 'rgb_array' or 'human' "
            "frames): render a Gymnasium env of the same id from the obs if you need images")

    # Attributes the sub-envs of a SyncVectorEnv would answer for (besides
    # the env's parameters, see _params).
    _ENV_ATTRS = ("observation_space", "action_space", "spec", "metadata", "render_mode",
                  "np_random_seed")

    @property
    def np_random_seed(self):
        """Each env's seed, a tuple as SyncVectorEnv gives it (its envs'
        np_random_seed): with rng='numpy' the seed Gymnasium's env would
        have been reset with (seed + i after make_vec(seed=...) or
        reset(seed=...); seed[i] after reset(seed=[...]); i without a
        seed: the library seeds with 0), else the (seed, index) pair the
        instance RNG was seeded from; -1 after restore() (the checkpoint's
        RNG states, of unknown seeds)."""
        return tuple(self._env_seeds)

    def _params(self):
        """The env's parameters in this pool ({name: (value, flags, note)},
        sr_env_param_at on the pool's spec: the values set_attr set)."""
        return _lib.env_params(_lib.pool_info(self._live()).spec)

    def _unknown_attr(self, name):
        return AttributeError(
            "stepring envs are C structs without Python attributes; get_attr/call know %s and "
            "the env's parameters (%s), not %r"
            % (", ".join(self._ENV_ATTRS), ", ".join(self._params()) or "none", name))

    @_exclusive
    def get_attr(self, name):
        """A tuple of num_envs values of a sub-env attribute, as
        SyncVectorEnv.get_attr: observation_space, action_space (the single
        spaces), spec, metadata, render_mode, np_random_seed (each env's
        seed, as np_random_seed), and the env's parameters by Gymnasium's
        attribute names (CartPole's gravity, masspole, ..., x_threshold;
        Pendulum's g ...; docs/python.md lists them), whose values every
        env of the pool shares."""
        self._live()
        if name == "np_random_seed":
            return tuple(self._env_seeds)
        if name in self._ENV_ATTRS:
            if name == "observation_space":
                v = self.single_observation_space
            elif name == "action_space":
                v = self.single_action_space
            else:
                v = getattr(self, name)
            return tuple(v for _ in range(self.num_envs))
        par = self._params().get(name)
        if par is None:
            raise self._unknown_attr(name)
        v = bool(par[0]) if par[1] & _lib.SR_ENV_PARAM_BOOL else float(par[0])
        return tuple(v for _ in range(self.num_envs))

    def call(self, name, *args, **kwargs):
        """SyncVectorEnv.call: the sub-envs' attribute @name per env (none
        of the attributes stepring knows is callable, see get_attr)."""
        if args or kwargs:
            raise AttributeError("stepring envs have no methods to call with arguments (%r)"
                                 % (name,))
        return self.get_attr(name)

    @_exclusive
    def set_attr(self, name, values):
        """Set an env parameter (get_attr's list) as SyncVectorEnv.set_attr
        sets the sub-envs' attribute: @values is one value per env (a list
        or tuple of num_envs) or the value of every env. The next step uses
        it, as Gymnasium's env's next step does (sr_pool_set_params; sync
        mode). The envs of a pool share their parameters (the pool's C
        spec holds them): different values per env are refused, as are
        read-only parameters (x_threshold ...: the error says why) and
        other attributes (AttributeError)."""
        p = self._live()
        values = _values_per_env(name, values, self.num_envs)
        params = self._params()
        par = params.get(name)
        if par is None:
            if name in self._ENV_ATTRS:
                raise AttributeError("stepring: set_attr(%r) is not supported: it is fixed when "
                                     "the env is made" % (name,))
            raise self._unknown_attr(name)
        vals = []
        for v in values:
            if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
                vals.append(float(v))
            else:
                raise _lib.InvalidTypeError("set_attr(%r): a number, not %r" % (name, v))
        if len({repr(v) for v in vals}) > 1:
            raise _lib.InvalidArgumentError(
                -22, "set_attr(%r, %r): the envs of a stepring pool share their parameters "
                "(one C spec per pool), so one value for all of them; make one pool per value, "
                "or step Gymnasium's envs in a process pool (make_vec(env_fns=...)), whose "
                "set_attr sets each env's" % (name, list(values)))
        v = vals[0]
        arg = ("1" if v else "0") if par[1] & _lib.SR_ENV_PARAM_BOOL else repr(v)
        check(lib.sr_pool_set_params(p, ("%s=%s" % (name, arg)).encode()))

    # --- replay ------------------------------------------------------------

    def replay(self, kind="uniform", **kw):
        """A new replay sampler over this env's ring (see stepring.Replay):
        kind 'uniform' or 'prioritized', n_step, gamma, alpha, beta, eps,
        seed, samples_per_insert, min_size, error_buffer, timeout_ms."""
        kw.setdefault("output", self.output)
        return Replay(self, kind, **kw)

    def sample(self, batch_size):
        """batch_size uniform 1-step transitions from the ring (a default
        sampler, seeded like the env, made on first use)."""
        if getattr(self, "_default_replay", None) is None or \
                self._default_replay._owner is not self._handle:
            self._default_replay = self.replay("uniform", seed=self._seed)
        return self._default_replay.sample(batch_size)

    # --- checkpoints ---------------------------------------------------------

    @_exclusive
    def checkpoint(self, path, *, replay=False, backend="auto", wait=True):
        """Checkpoint the pool into @path (replaced atomically): env states
        with their RNGs, episode counters, statistics and, with replay=True,
        the replay window. Call between steps (async: with nothing in
        flight). The snapshot is taken now; the file is written in the
        background unless backend='sync'. wait=True waits for the file and
        returns its status (a dict); wait=False returns None at once (see
        checkpoint_poll/checkpoint_wait)."""
        p = self._live()
        if backend not in _lib.CKPT_BACKENDS:
            raise ValueError("backend must be one of %s, not %r"
                             % (", ".join(_lib.CKPT_BACKENDS), backend))
        o = _lib.sr_ckpt_opts()
        lib.sr_ckpt_opts_init(ctypes.byref(o))
        o.flags |= _lib.SR_CKPT_F_BACKEND
        o.backend = _lib.CKPT_BACKENDS[backend]
        if replay:
            o.flags |= _lib.SR_CKPT_F_REPLAY
        check(lib.sr_pool_checkpoint(p, _fspath(path), ctypes.byref(o)))
        return self._checkpoint_wait() if wait else None

    def _ckpt_status(self, fn):
        st = _lib.sr_ckpt_status()
        rc = fn(self._live(), ctypes.byref(st))
        d = {k: getattr(st, k) for k, _ in st._fields_ if not k.startswith("reserved")}
        d["state"] = _lib.CKPT_STATES.get(st.state, str(st.state))
        d["backend"] = (lib.sr_ckpt_backend_name(st.backend) or b"?").decode()
        return rc, d

    @_exclusive
    def checkpoint_poll(self):
        """(done, status): done is False while a checkpoint is being written.
        A failed checkpoint raises (once), with the reason."""
        rc, d = self._ckpt_status(lib.sr_pool_checkpoint_poll)
        if rc == -errno.EINPROGRESS:
            return False, d
        check(rc)
        return True, d

    @_exclusive
    def checkpoint_wait(self):
        """Wait for the checkpoint in flight; its status, or an exception
        if it failed."""
        return self._checkpoint_wait()

    def _checkpoint_wait(self):
        rc, d = self._ckpt_status(lib.sr_pool_checkpoint_wait)
        check(rc)
        return d

    @_exclusive
    def restore(self, path):
        """Restore the pool from a checkpoint made by an env of the same
        geometry (env, num_envs, batch_size ...), in this process or
        another: the next step() continues the saved trajectories exactly.
        The obs the policy acts on next is the last one returned before the
        checkpoint: keep it with your trainer's state. Raises (and changes
        nothing) on a missing, corrupt or mismatched file."""
        check(lib.sr_pool_restore(self._live(), _fspath(path)))
        self._ended[:] = False
        # The RNG states are the checkpoint's: their seeds are unknown here
        # (-1, Gymnasium's np_random_seed of an RNG set directly).
        self._env_seeds = [-1] * self.num_envs

    # --- extras --------------------------------------------------------------

    @_exclusive
    def stats(self):
        """sr_pool_stats_get as a dict."""
        s = _lib.sr_pool_stats()
        check(lib.sr_pool_stats_get(self._live(), ctypes.byref(s)))
        return {k: getattr(s, k) for k, _ in s._fields_ if not k.startswith("reserved")}

    @_exclusive
    def worker_stats(self):
        """sr_pool_worker_stats_get for every worker, as dicts (cpu None
        where the worker is not bound to one CPU)."""
        out = []
        for w in range(self.num_threads):
            s = _lib.sr_pool_worker_stats()
            check(lib.sr_pool_worker_stats_get(self._live(), w, ctypes.byref(s)))
            d = {k: getattr(s, k) for k, _ in s._fields_}
            if d["cpu"] < 0:
                d["cpu"] = None
            out.append(d)
        return out

    def ring_memory(self):
        """(address, length) of the ring's shared-memory segment."""
        info = _lib.ring_info(_lib.pool_info(self._live()).ring)
        return info.base, info.bytes

    def __repr__(self):
        return "<stepring.VectorEnv %s num_envs=%d mode=%s batch_size=%d%s>" % (
            self._env_name, self.num_envs, self.mode, self.batch_size,
            " closed" if self.closed else "")


def _is_torch(x):
    return type(x).__module__.startswith("torch")
