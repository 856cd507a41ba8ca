"""VectorEnv: a stepring pool behind Gymnasium's vector-env conventions.

Zero copy: step() and reset() return numpy arrays that are views of the
memory the C pool hands back (the ring's columns when the batch rows are
ring slots). Like the C batch they are valid until the next call on the
env: copy what you keep (np.copy / tensor.clone()). The views hold a
reference to the pool, so memory stays mapped while any view is alive, even
after close(): reading a stale view is wrong but never crashes.
"""
import ctypes
import errno
import math

import numpy as np

from . import _lib
from ._lib import lib, check
from .spaces import Box, Discrete, batch_space

_AUTORESET = {
    "next_step": _lib.SR_AUTORESET_NEXT_STEP,
    "same_step": _lib.SR_AUTORESET_SAME_STEP,
    "disabled": _lib.SR_AUTORESET_DISABLED,
}
_BIND = {"core": _lib.SR_BIND_CORE, "numa": _lib.SR_BIND_NUMA, "none": _lib.SR_BIND_NONE}
_DEVICE = {"cpu": _lib.SR_DEVICE_HOST, "cuda": _lib.SR_DEVICE_CUDA}


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


def _spec_spaces(spec):
    shape = tuple(spec.obs_shape[i] for i in range(spec.obs_ndim))
    d = spec.obs_dim
    low = np.ctypeslib.as_array(spec.obs_low, (d,)).copy() if spec.obs_low else \
        np.full(d, -np.inf, np.float32)
    high = np.ctypeslib.as_array(spec.obs_high, (d,)).copy() if spec.obs_high else \
        np.full(d, np.inf, np.float32)
    obs = Box(low.reshape(shape), high.reshape(shape), dtype=np.float32)
    if spec.act_kind == _lib.SR_SPACE_DISCRETE:
        act = Discrete(spec.act_n)
    else:
        a = spec.act_dim
        act = Box(np.ctypeslib.as_array(spec.act_low, (a,)).copy(),
                  np.ctypeslib.as_array(spec.act_high, (a,)).copy(), dtype=np.float32)
    return obs, act


class EnvSpec:
    """What Gymnasium's EnvSpec says that stepring knows: id, name,
    max_episode_steps."""

    def __init__(self, spec):
        self.id = spec.id.decode()
        self.name = spec.name.decode()
        self.max_episode_steps = spec.max_episode_steps or None

    def __repr__(self):
        return "EnvSpec(id=%r, max_episode_steps=%r)" % (self.id, self.max_episode_steps)


class VectorEnv:
    """num_envs instances of one env type stepped by a stepring pool.

    Use stepring.make_vec() to build one. Follows gymnasium.vector.VectorEnv:
    reset() -> (obs, info), step(actions) -> (obs, reward, terminated,
    truncated, info), close(), context manager; in async mode step() is
    send() then recv() and info['env_id'] says which envs the rows are.
    """

    metadata = {}
    render_mode = None
    closed = False
    _dev = None
    _default_replay = None

    def __init__(self, env_id, num_envs, *, mode="sync", batch_size=None, num_threads=None,
                 seed=None, autoreset_mode="next_step", device="cpu", replay_capacity=None,
                 output="numpy", bind="core", cpuset=None, ring_name=None, batch_groups=True,
                 rebalance=True):
        self._handle = None
        self._p = None
        self.closed = True
        if not _lib.has("sr_pool_create"):
            raise _lib.UnsupportedError(-38, "this libstepring has no pool (sr_pool_create)")
        if mode not in ("sync", "async"):
            raise ValueError("mode must be 'sync' or 'async', not %r" % (mode,))
        if autoreset_mode not in _AUTORESET:
            raise ValueError("autoreset_mode must be one of %s, not %r"
                             % (", ".join(_AUTORESET), autoreset_mode))
        if device not in _DEVICE:
            raise ValueError("device must be 'cpu' or 'cuda', not %r" % (device,))
        if output not in ("numpy", "torch", "dlpack"):
            raise ValueError("output must be 'numpy', 'torch' or 'dlpack', not %r" % (output,))
        if bind not in _BIND:
            raise ValueError("bind must be one of %s, not %r" % (", ".join(_BIND), bind))
        num_envs = _as_count("num_envs", num_envs)
        if mode == "sync":
            if batch_size is not None and int(batch_size) != num_envs:
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
        if device == "cuda":
            output = "dlpack"  # a GPU batch can only come out as a tensor
        self._env_name = str(env_id)
        self.num_envs = num_envs
        self.batch_size = batch_size
        self.mode = mode
        self.autoreset_mode = autoreset_mode
        self.device = device
        self.output = output
        self.metadata = {"autoreset_mode": autoreset_mode}
        self._num_threads = 0 if num_threads is None else _as_count("num_threads", num_threads)
        self._replay_capacity = 0 if replay_capacity is None else int(replay_capacity)
        self._bind = _BIND[bind]
        self._cpuset = cpuset
        self._ring_name = ring_name
        self._batch_groups = bool(batch_groups)
        self._rebalance = bool(rebalance)
        self._seed = seed
        self._async = mode == "async"
        self._same_step = autoreset_mode == "same_step"
        self._torch = output == "torch"
        self._dlpack = output == "dlpack"
        self._dev = None
        self._plain = not self._async and not self._same_step and not self._dlpack
        self._c_step = lib.sr_pool_step
        self._bp = ctypes.POINTER(_lib.sr_batch)()
        self._bpref = ctypes.byref(self._bp)
        self._create(seed)

        spec = lib.sr_pool_spec(self._handle.ptr).contents
        self.spec = EnvSpec(spec)
        self._discrete = spec.act_kind == _lib.SR_SPACE_DISCRETE
        self._act_dim = spec.act_dim
        self._obs_shape = tuple(spec.obs_shape[i] for i in range(spec.obs_ndim))
        self.single_observation_space, self.single_action_space = _spec_spaces(spec)
        self.observation_space = batch_space(self.single_observation_space, batch_size)
        self.action_space = batch_space(self.single_action_space, batch_size)
        if seed is not None:
            self.single_action_space.seed(seed)
            self.action_space.seed(seed)

    # --- pool lifecycle --------------------------------------------------

    def _create(self, seed):
        o = _lib.sr_pool_opts()
        lib.sr_pool_opts_init(ctypes.byref(o))
        self._name_b = self._env_name.encode()
        o.env = self._name_b
        o.num_envs = self.num_envs
        o.num_threads = self._num_threads
        o.batch_size = self.batch_size
        if seed is not None:
            o.flags |= _lib.SR_POOL_F_SEED
            o.seed = int(seed) & (2**64 - 1)
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
        if not self._batch_groups:
            o.flags |= _lib.SR_POOL_F_NO_BATCH_GROUPS
        if not self._rebalance:
            o.flags |= _lib.SR_POOL_F_NO_REBALANCE
        o.ring_capacity = self._replay_capacity
        # The pool's batches stay on the host (views of the ring); with
        # output 'dlpack' an sr_device lands them where asked (below).
        o.device = _lib.SR_DEVICE_HOST
        ptr = ctypes.c_void_p()
        check(lib.sr_pool_create(ctypes.byref(o), ctypes.byref(ptr)))
        self._handle = _PoolHandle(ptr.value)
        self.closed = False
        self._fresh = True
        self._seed = seed
        self._setup_views()
        if self._dlpack:
            self._open_device()

    def _setup_views(self):
        h = self._handle
        spec = lib.sr_pool_spec(h.ptr).contents
        d = int(spec.obs_dim)
        w = self.output == "torch"  # torch.from_numpy wants writeable arrays
        self._c_obs = _Column(np.float32, d, h, w)
        self._c_fobs = _Column(np.float32, d, h, w)
        self._c_rew = _Column(np.float32, 0, h, w)
        self._c_term = _Column(np.bool_, 0, h, w)
        self._c_trunc = _Column(np.bool_, 0, h, w)
        self._c_id = _Column(np.uint32, 0, h, w)
        self._vcache = {}
        self._ring = lib.sr_pool_ring(h.ptr) if _lib.has("sr_pool_ring") else None
        if self._ring and _lib.has("sr_ring_obs_col"):
            r = self._ring
            cap = int(lib.sr_ring_capacity(r))
            cols = (("sr_ring_obs_col", self._c_obs), ("sr_ring_obs_col", self._c_fobs),
                    ("sr_ring_reward_col", self._c_rew),
                    ("sr_ring_terminated_col", self._c_term),
                    ("sr_ring_truncated_col", self._c_trunc),
                    ("sr_ring_env_id_col", self._c_id))
            for fn, col in cols:
                f = _lib.declare(fn, ctypes.c_void_p, [ctypes.c_void_p])
                if f is not None:
                    col.add_region(f(r), cap)
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
        if not _lib.has("sr_device_open"):
            raise _lib.UnsupportedError(-38, "this libstepring has no device API")
        spec = lib.sr_pool_spec(self._handle.ptr).contents
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
        """The pool pointer; RuntimeError once closed."""
        h = self._handle
        if h is None or h.ptr is None or self.closed:
            raise RuntimeError("stepring: this env is closed")
        return h.ptr

    def close(self):
        """Stop the workers and free the pool (deferred while views of its
        memory are alive). Safe to call twice."""
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

    @property
    def unwrapped(self):
        return self

    @property
    def num_threads(self):
        return int(lib.sr_pool_num_threads(self._live()))

    @property
    def batch_groups(self):
        """Async: how many fixed batch groups the envs form (step() then
        cycles through them), 0 when batch_size does not tile num_envs (or
        is below the thread count) and in sync mode."""
        return int(lib.sr_pool_batch_groups(self._live()))

    def worker_cpus(self):
        """The CPU each worker thread is bound to, None where it is not bound
        to one (bind numa or none; worker 0 is this thread, which the pool
        does not bind): for placing the trainer's own threads elsewhere."""
        out = []
        for w in range(self.num_threads):
            c = lib.sr_pool_worker_cpu(self._live(), w)
            if c == -errno.ENOENT:
                out.append(None)
            else:
                out.append(_lib.check(c, "sr_pool_worker_cpu"))
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
        if self._plain:
            return out[0], out[1], out[2], out[3], {}
        info = {}
        if self._async:
            v = self._c_id.view(b.env_id, n)
            if self._torch:
                import torch
                v = torch.from_numpy(v.astype(np.int64))  # torch has no uint32
            info["env_id"] = v
        if self._same_step and b.final_obs:
            fo = self._c_fobs.view(b.final_obs, n)
            if len(self._obs_shape) != 1:
                fo = fo.reshape((n,) + self._obs_shape)
            if self._torch:
                import torch
                fo = torch.from_numpy(fo)
            info["final_obs"] = fo
            info["_final_obs"] = out[2] | out[3]
        return out[0], out[1], out[2], out[3], info

    def _views(self, b, n):
        """(obs, reward, terminated, truncated) over batch @b's memory."""
        obs = self._c_obs.view(b.obs, n)
        if len(self._obs_shape) != 1:
            obs = obs.reshape((n,) + self._obs_shape)
        out = (obs, self._c_rew.view(b.reward, n), self._c_term.view(b.terminated, n),
               self._c_trunc.view(b.truncated, n))
        if self._torch:
            import torch
            out = tuple(torch.from_numpy(x) for x in out)
        return out

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
            buf[:n] = a.reshape(n, self._act_dim)  # NaN is checked by the C side
        return self._aptr

    # --- Gymnasium API -----------------------------------------------------

    def reset(self, *, seed=None, options=None):
        """Reset every env. seed (an int) re-seeds: env i then starts from
        (seed, i), exactly as make_vec(seed=seed) would. options may hold
        'reset_mask' (a bool array of num_envs, autoreset_mode='disabled'):
        reset only those envs. Returns (obs, info)."""
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise ValueError("seed must be an int (one seed for all envs), not %r" % (seed,))
        p = self._live()
        if seed is not None and (not self._fresh or int(seed) != self._seed):
            self._recreate(int(seed))
            p = self._handle.ptr
        if seed is not None:
            self.single_action_space.seed(int(seed))
            self.action_space.seed(int(seed))
        self._fresh = False
        mask = (options or {}).get("reset_mask")
        if mask is not None:
            if self.mode != "sync":
                raise ValueError("reset_mask needs mode='sync'")
            m = np.ascontiguousarray(mask, dtype=np.uint8)
            if m.shape != (self.num_envs,):
                raise ValueError("reset_mask must have shape (%d,), not %s"
                                 % (self.num_envs, m.shape))
            check(lib.sr_pool_reset_mask(p, m.ctypes.data, self._bpref))
        elif self.mode == "sync":
            check(lib.sr_pool_reset(p, self._bpref))
        else:
            check(lib.sr_pool_reset(p, self._bpref))
            check(lib.sr_pool_recv(p, self._bpref))
        obs, _, _, _, info = self._batch()
        return obs, info

    def _recreate(self, seed):
        # A new pool: the old one goes when its last view goes.
        self.close()
        self._create(seed)

    def step(self, actions):
        """Sync: step every env with num_envs actions. Async: send actions to
        the envs of the last batch, then wait for the next batch.
        Returns (obs, reward, terminated, truncated, info)."""
        p = self._p
        if p is None:
            self._live()
        self._fresh = False
        if self._async:
            self.send(actions)
            return self.recv()
        # The common case inline (this is the per-step cost of the binding):
        # int32/float32 actions of the right shape, a batch already seen.
        a = actions
        if type(a) is np.ndarray and a.dtype is self._adtype and a.shape == self._ashape:
            self._abuf[:] = a
            ptr = self._aptr
        else:
            ptr = self._actions(actions, self.num_envs)
        rc = self._c_step(p, ptr, self._bpref)
        if rc < 0:
            raise _lib.error_for(rc)
        if self._plain:
            b = self._bp.contents
            out = self._vcache.get((b.obs, b.reward, b.n))
            if out is not None:
                return out[0], out[1], out[2], out[3], {}
        return self._batch()

    def send(self, actions, env_id=None):
        """Async: hand actions to envs env_id (default: the envs of the last
        batch) and return at once."""
        p = self._live()
        if self.mode != "async":
            raise RuntimeError("send/recv need mode='async' (this env is sync: use step)")
        ids = None
        n = self.batch_size
        if env_id is not None:
            e = np.asarray(env_id)
            if e.dtype.kind not in "iu" or e.ndim > 1 or (e.size and e.min() < 0):
                raise _lib.InvalidArgumentError(-22, "env_id must be env indices, not %r"
                                                % (env_id,))
            n = e.size
            if n > self.num_envs or n == 0:
                raise _lib.InvalidArgumentError(-22, "send: %d env ids for %d envs"
                                                % (n, self.num_envs))
            self._ids[:n] = e.reshape(n)
            ids = self._ids_ptr
        check(lib.sr_pool_send(p, self._actions(actions, n), ids, n))

    def recv(self):
        """Async: wait for batch_size envs whose step finished."""
        p = self._live()
        if self.mode != "async":
            raise RuntimeError("send/recv need mode='async' (this env is sync: use step)")
        check(lib.sr_pool_recv(p, self._bpref))
        return self._batch()

    # --- replay ------------------------------------------------------------

    def replay(self, kind="uniform", **kw):
        """A new replay sampler over this env's ring (see stepring.Replay):
        kind 'uniform' or 'prioritized', n_step, gamma, alpha, beta, eps,
        seed, samples_per_insert, min_size, error_buffer, timeout_ms."""
        from .replay import Replay
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
        return self.checkpoint_wait() if wait else None

    def _ckpt_status(self, fn):
        st = _lib.sr_ckpt_status()
        rc = fn(self._live(), ctypes.byref(st))
        d = {k: getattr(st, k) for k, _ in st._fields_ if not k.startswith("reserved")}
        d["state"] = _lib.CKPT_STATES.get(st.state, str(st.state))
        d["backend"] = (lib.sr_ckpt_backend_name(st.backend) or b"?").decode()
        return rc, d

    def checkpoint_poll(self):
        """(done, status): done is False while a checkpoint is being written.
        A failed checkpoint raises (once), with the reason."""
        rc, d = self._ckpt_status(lib.sr_pool_checkpoint_poll)
        if rc == -errno.EINPROGRESS:
            return False, d
        check(rc)
        return True, d

    def checkpoint_wait(self):
        """Wait for the checkpoint in flight; its status, or an exception
        if it failed."""
        rc, d = self._ckpt_status(lib.sr_pool_checkpoint_wait)
        check(rc)
        return d

    def restore(self, path):
        """Restore the pool from a checkpoint made by an env of the same
        geometry (env, num_envs, batch_size ...), in this process or
        another: the next step() continues the saved trajectories exactly.
        The obs the policy acts on next is the last one returned before the
        checkpoint: keep it with your trainer's state. Raises (and changes
        nothing) on a missing, corrupt or mismatched file."""
        check(lib.sr_pool_restore(self._live(), _fspath(path)))
        self._fresh = False

    # --- extras --------------------------------------------------------------

    def stats(self):
        """sr_pool_stats_get as a dict."""
        s = _lib.sr_pool_stats()
        check(lib.sr_pool_stats_get(self._live(), ctypes.byref(s)))
        return {k: getattr(s, k) for k, _ in s._fields_}

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
        n = ctypes.c_size_t()
        base = lib.sr_ring_base(lib.sr_pool_ring(self._live()), ctypes.byref(n))
        return base, n.value

    def __repr__(self):
        return "<stepring.VectorEnv %s num_envs=%d mode=%s batch_size=%d%s>" % (
            self._env_name, self.num_envs, self.mode, self.batch_size,
            " closed" if self.closed else "")


def _fspath(path):
    import os
    return os.fsencode(path)


def checkpoint_info(path):
    """Verify a checkpoint file (header, trailer, every section's CRC32C)
    and return what it says as a dict; raises on a corrupt file."""
    info = _lib.sr_ckpt_info()
    check(lib.sr_checkpoint_verify(_fspath(path), ctypes.byref(info)))
    d = {k: getattr(info, k) for k, _ in info._fields_ if k != "sections"}
    d["build_info"] = info.build_info.decode(errors="replace")
    d["env_id"] = info.env_id.decode(errors="replace")
    d["sections"] = [{"name": (lib.sr_ckpt_section_name(x.type) or b"?").decode(),
                      "type": x.type, "offset": x.offset, "length": x.length, "crc": x.crc}
                     for x in info.sections[:info.n_sections]]
    return d


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _as_count(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            v = int(v)
        else:
            raise ValueError("%s must be a positive int, not %r" % (name, v))
    if v < 1:
        raise ValueError("%s must be >= 1, not %d" % (name, v))
    return int(v)


def make_vec(env_id, num_envs, *, mode="sync", batch_size=None, num_threads=None, seed=None,
             autoreset_mode="next_step", device="cpu", replay_capacity=None, **kw):
    """Create a VectorEnv of num_envs instances of env_id ("CartPole-v1").

    mode: 'sync' (step all envs) or 'async' (recv returns the first
    batch_size envs done). num_threads: workers (None: one per core).
    seed: env i is seeded from (seed, i). autoreset_mode: 'next_step'
    (Gymnasium default), 'same_step' (final obs in info['final_obs']) or
    'disabled'. device: 'cpu' or 'cuda'. replay_capacity: ring slots (a
    power of two). Extra keywords: output='numpy'|'torch', bind, cpuset,
    ring_name, batch_groups (False: async per-env queues only, see
    VectorEnv.batch_groups), rebalance (False: each worker steps exactly
    its own envs, in sync mode and in batch groups; see
    worker_stats()['rows']).
    Raises LookupError (UnknownEnvError) for an unknown env, ValueError for
    bad options, RuntimeError for other failures, with the C message.
    """
    return VectorEnv(env_id, num_envs, mode=mode, batch_size=batch_size, num_threads=num_threads,
                     seed=seed, autoreset_mode=autoreset_mode, device=device,
                     replay_capacity=replay_capacity, **kw)
