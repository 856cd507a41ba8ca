"""Python envs in worker processes: stepring.make_vec(env_fns=[...]).

    import gymnasium, stepring
    from gymnasium.envs.classic_control import CartPoleEnv
    envs = stepring.make_vec(env_fns=[CartPoleEnv] * 64, num_workers=2, seed=0)
    obs, info = envs.reset()
    obs, rew, term, trunc, info = envs.step(envs.action_space.sample())

Each worker process owns a contiguous slice of the envs for its life; the
env factories are pickled (cloudpickle) once, when the workers start. A
step writes the actions into the pool's command block in shared memory and
wakes the workers (a futex), which step their envs and write obs, rewards
and flags straight into the ring's columns: no pipes, no pickling on the
hot path. A worker that crashes, raises, exits or hangs past step_timeout
is replaced: the step returns normally, its envs' rows are truncated with
info["fault"] set (do not bootstrap through them), and they start over
with a reset at the next step, seeded from (seed, env index, restarts).
reset(seed=..., options=...) reseeds and resets the envs in place, as
SyncVectorEnv does (the options dict is pickled once per reset into the
command block). See docs/procs.md.
"""
import ctypes
import errno
import os
import pickle
import sys
import traceback

import numpy as np

from . import _lib
from ._procworker import ATTR as _ATTR
from ._procworker import CMD_SAVE as _CMD_SAVE
from ._procworker import INFO_ATTR as _INFO_ATTR
from ._procworker import Slice
from ._placement import caller_place, caller_unplace, caller_unplaced
from ._utils import (_autoreset_name, _metadata_mode, _AUTORESET, _BIND, ClosedError,
                     _check_reset_mask, _reset_seeds, _values_per_env)

try:
    import gymnasium
    from gymnasium.vector.utils import batch_space
    _Base = gymnasium.vector.VectorEnv
except ImportError:  # pragma: no cover - gymnasium is needed for env_fns
    gymnasium = None
    _Base = object

_STUB = ctypes.CFUNCTYPE(None)
_INLINE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.POINTER(_lib.sr_proc_info),
                              ctypes.POINTER(_lib.sr_proc_cmd))


def _stub():  # never called: the envs live in the worker processes
    raise AssertionError("stepring: a process pool's spec function was called")


class ProcVectorEnv(_Base):
    """A gymnasium.vector.VectorEnv of Python envs stepped in worker processes
    attached to a stepring pool's shared-memory ring (sync; autoreset_mode
    next_step, same_step or disabled, as SyncVectorEnv). info["fault"] (and
    "_fault") marks rows whose worker died or hung during the step:
    truncated, obs zero, reward 0 (same_step: obs of the env's next
    episode, its final obs zero). Made by stepring.make_vec(env_fns=...).

    The envs are env_fns[i]() (callables, as gymnasium.vector.AsyncVectorEnv
    takes) in num_workers workers: with inline (the default) worker 0's
    envs are stepped in this process, by the calling thread, while
    num_workers - 1 processes step the others (num_workers CPUs busy, not
    num_workers + 1); an exception there is a fault like any other, but a
    segfault or a hang in them is this process's. inline=False: every env
    in a worker process. check_finite: as stepring.make_vec's
    (info["nonfinite"] marks rows with a NaN or an infinity in the obs or
    reward). autoreset_mode: 'next_step' (the default), 'same_step' or
    'disabled' (or a gymnasium.vector.AutoresetMode), with SyncVectorEnv's
    semantics. The envs' info dicts are merged into the vector info as
    SyncVectorEnv does; info_bytes: each worker process's area for them
    (pickled once per step, only when an env returned a non-empty dict;
    default 64 KiB + 512 bytes per env). bind: where the worker processes
    run, as stepring.make_vec's ('core': each on a CPU of its own, the
    default; 'numa'; 'none'). bind_caller (True): the calling thread (and
    threads it starts later) leaves the worker processes' CPUs to them
    while the pool is open, when a CPU is left for it; False leaves it
    alone."""

    def __init__(self, env_fns, *, num_workers=2, seed=None, step_timeout=None,
                 max_restarts=100, copy=True, inline=True, check_finite=None,
                 autoreset_mode="next_step", info_bytes=None, bind="core",
                 bind_caller=True):
        if gymnasium is None:
            raise _lib.UnsupportedError(-38, "make_vec(env_fns=...) needs gymnasium")
        import cloudpickle
        env_fns = list(env_fns)
        self.autoreset_mode = _autoreset_name(autoreset_mode)
        if not env_fns:
            raise ValueError("env_fns is empty")
        if not all(callable(f) for f in env_fns):
            raise TypeError("env_fns must be callables that return an env")
        dummy = env_fns[0]()
        try:
            self.single_observation_space = dummy.observation_space
            self.single_action_space = dummy.action_space
            self.metadata = dict(getattr(dummy, "metadata", {}) or {})
            self.render_mode = None
            # The pool's env id (checkpoints compare it): the Gymnasium id
            # of a registered env, else its class.
            name = getattr(getattr(dummy, "spec", None), "id", None) or \
                type(getattr(dummy, "unwrapped", dummy)).__qualname__
            self._env_id = ("py:" + str(name))[:63].encode(errors="replace")
        finally:
            dummy.close()
        spaces = gymnasium.spaces
        ob, ac = self.single_observation_space, self.single_action_space
        if not isinstance(ob, spaces.Box):
            raise ValueError("stepring process workers hold Box observations (any shape, "
                             "flattened to float32 in the ring); got %r" % (ob,))
        if isinstance(ac, spaces.Discrete):
            if ac.start != 0:
                raise ValueError("Discrete action spaces must start at 0; got %r" % (ac,))
            self._discrete = True
        elif isinstance(ac, spaces.Box):
            self._discrete = False
        else:
            raise ValueError("stepring process workers take Discrete or Box actions; got %r"
                             % (ac,))
        self.num_envs = len(env_fns)
        self.observation_space = batch_space(ob, self.num_envs)
        self.action_space = batch_space(ac, self.num_envs)
        self.metadata["autoreset_mode"] = _metadata_mode(self.autoreset_mode)
        self._same_step = self.autoreset_mode == "same_step"
        self._disabled = self.autoreset_mode == "disabled"
        # disabled: envs whose episode ended and that were not reset yet
        self._ended = np.zeros(self.num_envs, bool)
        self._obs_shape = tuple(ob.shape)
        self._obs_dim = int(np.prod(self._obs_shape)) if self._obs_shape else 1
        self._num_workers = max(1, min(int(num_workers), self.num_envs))
        self._step_timeout = step_timeout
        self._max_restarts = int(max_restarts)
        self._copy = copy
        self._inline = bool(inline)
        if bind not in _BIND:
            raise ValueError("bind must be one of %s, not %r" % (", ".join(_BIND), bind))
        self._bind = bind
        self._bind_caller = bool(bind_caller)
        self._caller_tid = None  # the thread this pool moved off its workers' CPUs
        self._check_finite = None if check_finite is None else bool(check_finite)
        # Each worker process's area for its envs' infos (pickled, only
        # when an env returns a non-empty info dict).
        per = -(-self.num_envs // self._num_workers)
        self._info_bytes = int(info_bytes) if info_bytes is not None else 65536 + 512 * per
        self._info_warned = False
        self._env_fns = env_fns
        self._payload = pickle.dumps({
            "sys_path": list(sys.path),
            "env_fns": cloudpickle.dumps(env_fns),
            "discrete": self._discrete,
            "obs_shape": self._obs_shape,
            "seeded": seed is not None,
        })
        self._seeded = seed is not None
        self._pool = None
        self._seed = None
        self._make_pool(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))

    # --- the pool -------------------------------------------------------
    def _make_pool(self, seed):
        lib = _lib.lib
        self._destroy()
        ac = self.single_action_space
        sp = _lib.sr_env_spec()
        ref = lib.sr_env_at(0).contents  # this library's ABI version and spec size
        sp.abi_version = ref.abi_version
        sp.spec_size = ref.spec_size
        sp.id = self._env_id
        sp.name = b"python"
        # The envs live in the workers (pickled at a checkpoint).
        sp.flags = _lib.SR_ENV_F_FOREIGN
        sp.state_size = 8
        sp.obs_ndim = 1
        sp.obs_shape[0] = self._obs_dim
        sp.obs_dim = self._obs_dim
        self._keep = [_STUB(_stub) for _ in range(4)]
        sp.seed, sp.reset, sp.step, sp.observe = [ctypes.cast(f, ctypes.c_void_p)
                                                  for f in self._keep]
        if self._discrete:
            sp.act_kind, sp.act_n, sp.act_dim = 1, int(ac.n), 1
            lo = hi = (ctypes.c_float * 1)(0.0)
        else:
            d = int(np.prod(ac.shape))
            sp.act_kind, sp.act_dim = 2, d
            lo = (ctypes.c_float * d)(*np.asarray(ac.low, np.float32).ravel())
            hi = (ctypes.c_float * d)(*np.asarray(ac.high, np.float32).ravel())
        sp.act_low, sp.act_high = (ctypes.cast(lo, ctypes.POINTER(ctypes.c_float)),
                                   ctypes.cast(hi, ctypes.POINTER(ctypes.c_float)))
        self._spec, self._bounds = sp, (lo, hi)
        here = os.path.dirname(os.path.abspath(__file__))
        argv = [sys.executable, os.path.join(here, "_procworker.py"), _lib.path]
        self._argv = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
        self._pbuf = ctypes.create_string_buffer(self._payload, len(self._payload))
        o = _lib.sr_pool_opts()
        lib.sr_pool_opts_init(ctypes.byref(o))
        o.flags = _lib.SR_POOL_F_SEED | _lib.SR_POOL_F_PROCS
        o.num_envs = self.num_envs
        o.spec = ctypes.pointer(sp)
        o.num_threads = self._num_workers
        o.seed = int(seed) & ((1 << 64) - 1)
        o.autoreset = _AUTORESET[self.autoreset_mode]
        o.bind = _BIND[self._bind]
        o.worker_argv = ctypes.cast(self._argv, ctypes.POINTER(ctypes.c_char_p))
        o.worker_payload = ctypes.cast(self._pbuf, ctypes.c_void_p)
        o.worker_payload_len = len(self._payload)
        o.step_timeout_ms = int(self._step_timeout * 1000) if self._step_timeout else 0
        o.max_restarts = self._max_restarts
        o.worker_out_size = self._info_bytes
        self._slice = None
        self._inline_exc = None
        if self._check_finite is not None:
            o.flags |= (_lib.SR_POOL_F_CHECK_FINITE if self._check_finite
                        else _lib.SR_POOL_F_NO_CHECK_FINITE)
        if self._inline:
            o.flags |= _lib.SR_POOL_F_PROC_INLINE
            self._inline_cb = _INLINE_FN(self._run_inline)
            o.proc_inline = ctypes.cast(self._inline_cb, ctypes.c_void_p)
        ptr = ctypes.c_void_p()
        with caller_unplaced():  # the plan reads this thread's own CPUs
            _lib.check(lib.sr_pool_create(ctypes.byref(o), ctypes.byref(ptr)))
        self._pool = ptr
        self._seed = seed
        self._place_caller()
        ring = _lib.pool_info(ptr).ring
        cap = lib.sr_ring_capacity(ring)
        self._mask = cap - 1
        self._flags = np.ctypeslib.as_array(
            (ctypes.c_uint8 * cap).from_address(lib.sr_ring_flags_col(ring)))

        def col(fn, ctype, width=1):
            return np.ctypeslib.as_array((ctype * (cap * width)).from_address(fn(ring)))

        # The ring's columns: a sync batch is num_envs contiguous rows of
        # them (one reservation), so a batch is a slice of these views.
        self._obs_base = lib.sr_ring_obs_col(ring)
        self._r_obs = col(lib.sr_ring_obs_col, ctypes.c_float, self._obs_dim).reshape(
            (cap,) + self._obs_shape)
        self._r_rew = col(lib.sr_ring_reward_col, ctypes.c_float)
        self._r_term = col(lib.sr_ring_terminated_col, ctypes.c_uint8)
        self._r_trunc = col(lib.sr_ring_truncated_col, ctypes.c_uint8)
        # The worker processes' info areas: (worker, length words, address
        # of the bytes, capacity), read after each command.
        self._outs = []
        for w in range(1 if self._inline else 0, self._num_workers):
            addr, size = ctypes.c_void_p(), ctypes.c_size_t()
            _lib.check(lib.sr_pool_worker_out(ptr, w, ctypes.byref(addr), ctypes.byref(size)))
            if addr.value and size.value > 8:
                lw = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(addr.value))
                self._outs.append((w, lw, addr.value + 8, size.value - 8))
        self._pb = _lib._PBATCH()
        self._pb_ref = ctypes.byref(self._pb)
        self._act_dtype = np.int32 if self._discrete else np.float32

    def _place_caller(self):
        """Keep this thread off the worker processes' CPUs (bind_caller):
        each worker process is bound to its CPU by the pool (bind='core'),
        and a trainer thread that the scheduler puts on a worker's CPU
        makes both wait for each other (a step fully serialized). This
        thread, and threads it starts later, keep every other CPU it was
        allowed; nothing changes when no CPU would be left. With several
        pools open on one thread it keeps what none of them took; the
        last close() gives its CPUs back (_placement.caller_place)."""
        if not self._bind_caller:
            return
        taken = set()
        for w in range(1 if self._inline else 0, self._num_workers):
            st = _lib.sr_pool_worker_stats()
            _lib.check(_lib.lib.sr_pool_worker_stats_get(self._pool, w, ctypes.byref(st)))
            if st.cpu >= 0:
                taken.add(st.cpu)
        if taken:
            self._caller_tid = caller_place(id(self), taken)

    def _unplace_caller(self):
        tid, self._caller_tid = getattr(self, "_caller_tid", None), None
        caller_unplace(id(self), tid)

    def _destroy(self):
        self._unplace_caller()
        if getattr(self, "_pool", None):
            _lib.lib.sr_pool_destroy(self._pool)
            self._pool = None
        sl, self._slice = getattr(self, "_slice", None), None
        if sl is not None:
            for e in sl.envs:
                e.close()

    def _run_inline(self, _arg, w, info_p, cmd_p):
        """Worker 0's slice, on this thread, while the worker processes
        step theirs (the pool calls it inside step and reset). An exception
        is a fault of worker 0: its rows become fault rows, the pool counts
        a restart, and the next call rebuilds its envs."""
        try:
            info = info_p.contents
            sl = self._slice
            if sl is None or sl.restarts != info.restarts:
                if sl is not None:
                    self._slice = None
                    for e in sl.envs:
                        try:
                            e.close()
                        except Exception:
                            pass
                sl = self._slice = Slice(_lib.lib, info, self._env_fns, self._discrete,
                                         self._obs_shape, seeded=self._seeded)
            c = cmd_p.contents
            if c.kind >= _CMD_SAVE:  # a checkpoint (no rows): never raises
                sl.xchg(w, c.kind, c.seq)
                return 0
            sl.run(w, c)
            return 0
        except BaseException as e:
            self._slice = None
            if not isinstance(e, Exception):
                self._inline_exc = e  # KeyboardInterrupt: raised after the call
            _lib.lib.sr_proc_worker_fail(
                w, traceback.format_exc().encode(errors="replace"))
            return 1

    def _call(self, fn, *args):
        if not getattr(self, "_pool", None):
            raise ClosedError()
        rc = fn(self._pool, *args)
        exc, self._inline_exc = self._inline_exc, None
        if exc is not None:
            raise exc
        _lib.check(rc)

    def _batch(self, what):
        b = self._pb.contents
        n, s = b.n, b.first_seq & self._mask
        if b.obs == self._obs_base + s * self._obs_dim * 4 and s + n <= self._mask + 1:
            # The batch is ring rows [s, s + n): slices of the column views.
            obs = self._r_obs[s:s + n]
            rew, term, trunc = self._r_rew[s:s + n], self._r_term[s:s + n], \
                self._r_trunc[s:s + n]
        else:
            od = b.obs_dim
            f32 = ctypes.POINTER(ctypes.c_float)
            u8 = ctypes.POINTER(ctypes.c_uint8)
            obs = np.ctypeslib.as_array(ctypes.cast(b.obs, f32), (n * od,)).reshape(
                (n,) + self._obs_shape)
            rew = np.ctypeslib.as_array(ctypes.cast(b.reward, f32), (n,))
            term = np.ctypeslib.as_array(ctypes.cast(b.terminated, u8), (n,))
            trunc = np.ctypeslib.as_array(ctypes.cast(b.truncated, u8), (n,))
        flags = self._flags[s:s + n]
        fault = (flags & _lib.SR_SLOT_FAULT) != 0
        info = {"fault": fault, "_fault": fault.copy()} if fault.any() else {}
        if b.nonfinite:
            info["nonfinite"] = (flags & _lib.SR_SLOT_NONFINITE) != 0
        dt = self.single_observation_space.dtype
        obs = obs.astype(dt) if dt != np.float32 else (obs.copy() if self._copy else obs)
        term, trunc = term.astype(bool), trunc.astype(bool)
        finals = None
        ents = self._env_infos(fault)
        if ents:
            # As SyncVectorEnv merges them (its _add_info), in env order.
            for e, kind, d in ents:
                if kind == 0:
                    info = self._add_info(info, d, e)
                else:
                    finals = (finals or []) + [(e, d)]
        if self._same_step and what == "step":
            done = term | trunc
            if done.any():
                self._final_infos(b, n, done, fault, info, finals)
        return obs, rew.astype(np.float64), term, trunc, info

    def _env_infos(self, fault):
        """The envs' non-empty info dicts of the last command, (env, kind,
        dict) in env order: the inline slice's, then each worker process's
        (unpickled from its area when its length word is not 0). Those of
        fault rows are dropped (a dead worker's area is stale)."""
        ents = None
        sl = self._slice
        if sl is not None and sl.infos:
            ents = sl.infos
            sl.infos = None
        for w, lw, addr, cap in self._outs:
            k = int(lw[0])
            if not k:
                continue
            if k == 0xffffffff:
                if not self._info_warned:
                    import warnings
                    warnings.warn("stepring: the env infos of worker %d took %d bytes pickled, "
                                  "more than its info area of %d (make_vec(info_bytes=...)): "
                                  "they were dropped" % (w, int(lw[1]), cap), RuntimeWarning)
                    self._info_warned = True
                continue
            got = pickle.loads(ctypes.string_at(addr, k))
            ents = got if ents is None else ents + got
        if ents and fault.any():
            ents = [x for x in ents if not fault[x[0]]]
        return ents

    def _final_infos(self, b, n, done, fault, info, finals=None):
        """same_step: as SyncVectorEnv, info["final_obs"] (an object array:
        the last obs of each env whose episode ended in this step, None
        elsewhere), info["final_info"] (their step infos) and the masks
        "_final_obs", "_final_info". A fault row's final obs is zeros (the
        env's state was lost with its worker)."""
        fo = np.ctypeslib.as_array(ctypes.cast(b.final_obs, ctypes.POINTER(ctypes.c_float)),
                                   (n * b.obs_dim,)).reshape((n,) + self._obs_shape)
        dt = self.single_observation_space.dtype
        arr = np.full(n, None, dtype=object)
        for i in np.flatnonzero(done):
            arr[i] = (np.zeros(self._obs_shape, dt) if fault[i] else fo[i].astype(dt))
        info["final_obs"] = arr
        info["_final_obs"] = done
        fi = {}
        for e, d in finals or ():
            fi = self._add_info(fi, d, e)
        info["final_info"] = fi
        info["_final_info"] = done.copy()

    # --- gymnasium.vector.VectorEnv -------------------------------------
    def reset(self, *, seed=None, options=None):
        """Reset every env, or those of options["reset_mask"] (a bool array
        of num_envs; the others keep their episode and show their last obs).

        seed: None (each env goes on with its RNG), an int s (env i is
        reset with seed s + i, Gymnasium's rule) or a list of num_envs ints
        or None (env i with seed[i]; None: not reseeded). options: the rest
        of the dict goes to every reset env's reset(options=...), pickled
        once into the command block (at most 64 KiB pickled). Nothing is
        restarted: the workers reseed and reset their envs in place."""
        opts = dict(options) if options else {}
        mask = opts.pop("reset_mask", None)
        ro = _lib.sr_pool_reset_opts()
        _lib.lib.sr_pool_reset_opts_init(ctypes.byref(ro))
        keep = []
        seed, seeds = _reset_seeds(seed, self.num_envs)
        if seeds is not None:
            sv = np.array([0 if x is None else x for x in seeds], dtype=np.uint64)
            sm = np.array([x is not None for x in seeds], dtype=np.uint8)
            keep += [sv, sm]
            ro.flags |= _lib.SR_RESET_F_SEEDS
            ro.seeds, ro.seed_mask = sv.ctypes.data, sm.ctypes.data
        elif seed is not None:
            ro.flags |= _lib.SR_RESET_F_SEED
            ro.seed = seed
        m = None
        if mask is not None:
            m = _check_reset_mask(mask, self.num_envs)
            mu8 = m.astype(np.uint8)
            keep.append(mu8)
            ro.flags |= _lib.SR_RESET_F_MASK
            ro.mask = mu8.ctypes.data
        if opts:
            pay = pickle.dumps(opts)
            if len(pay) > _lib.SR_PROC_RESET_PAYLOAD_MAX:
                raise ValueError("reset options of %d bytes pickled; process workers take at "
                                 "most %d" % (len(pay), _lib.SR_PROC_RESET_PAYLOAD_MAX))
            buf = ctypes.create_string_buffer(pay, len(pay))
            keep.append(buf)
            ro.flags |= _lib.SR_RESET_F_PAYLOAD
            ro.payload, ro.payload_len = ctypes.cast(buf, ctypes.c_void_p), len(pay)
        if ro.flags:
            self._call(_lib.lib.sr_pool_reset_ex, ctypes.byref(ro), ctypes.byref(self._pb))
        else:
            self._call(_lib.lib.sr_pool_reset, ctypes.byref(self._pb))
        del keep
        if seed is not None:
            from gymnasium.utils import seeding
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        if m is not None:
            self._ended[m] = False
        else:
            self._ended[:] = False
        obs, _, _, _, info = self._batch("reset")
        return obs, info

    def step(self, actions):
        if self._disabled and self._ended.any():
            raise _lib.ResetNeededError(
                "autoreset_mode='disabled': envs %s ended and were not reset; reset them "
                "with reset(options={'reset_mask': mask}) before stepping"
                % np.flatnonzero(self._ended).tolist())
        a = np.asarray(actions, dtype=self._act_dtype)
        if a.ndim == 0:
            # SyncVectorEnv iterates over the actions: a scalar is a TypeError.
            raise _lib.InvalidTypeError("expected %d actions, got a scalar (%r)"
                                        % (self.num_envs, actions))
        if a.shape[0] != self.num_envs:
            raise _lib.InvalidArgumentError(-22, "expected %d actions, got shape %s"
                                            % (self.num_envs, a.shape))
        a = np.ascontiguousarray(a)
        self._call(_lib.lib.sr_pool_step, a.ctypes.data, self._pb_ref)
        out = self._batch("step")
        if self._disabled:
            np.logical_or(out[2], out[3], out=self._ended)
        elif self._same_step and "fault" in out[4]:
            out = self._restart_rows(out)
        return out

    def _restart_rows(self, out):
        """same_step after a fault: the fault rows are truncated episodes,
        so their obs must be the first obs of the next one (the restarted
        worker starts them now, with a reset of those envs only: pad rows
        for the others in the ring), not zeros a policy would act on."""
        obs, rew, term, trunc, info = out
        m = info["fault"].astype(np.uint8)
        self._call(_lib.lib.sr_pool_reset_mask, m.ctypes.data, ctypes.byref(self._pb))
        fresh = self._batch("reset")[0]
        obs = obs.copy() if not obs.flags.writeable or not self._copy else obs
        sel = info["fault"]
        obs[sel] = fresh[sel]
        return obs, rew, term, trunc, info

    def close_extras(self, **kwargs):
        self._destroy()

    # --- the envs' attributes, as SyncVectorEnv's -----------------------------
    @property
    def np_random_seed(self):
        """Each env's np_random_seed, a tuple as SyncVectorEnv gives it
        (get_attr): the seed of its last seeded reset; before the first
        reset of a pool made with seed=s, s + i, the seed that reset will
        use (made without a seed, the first reset is reset(seed=None) as
        SyncVectorEnv's, and the env reports the seed it drew itself)."""
        return self.get_attr("np_random_seed")

    def get_attr(self, name):
        """The attribute @name of each env, a tuple (SyncVectorEnv.get_attr:
        env.get_wrapper_attr(name), called when callable), read in the
        workers (see _env_attr)."""
        return self._env_attr("get", name)

    def call(self, name, *args, **kwargs):
        """SyncVectorEnv.call: each env's @name called with the arguments
        (or its value when not callable), in the workers; a tuple."""
        return self._env_attr("call", name, None, args, kwargs)

    def set_attr(self, name, values):
        """SyncVectorEnv.set_attr: env i's @name set to values[i] (a list or
        tuple of num_envs), or every env's to @values; in the workers. A
        worker that restarts rebuilds its envs from env_fns, without the
        attributes set here (a checkpoint keeps them: it pickles the envs)."""
        return self._env_attr("set", name, _values_per_env(name, values, self.num_envs))

    def _env_attr(self, op, name, values=None, args=(), kwargs=None):
        """One attribute request to every env, in its worker: a reset
        command with an empty mask (no env resets; each row of the batch
        is a pad row, skipped by replay) whose payload is the request
        (cloudpickled, at most SR_PROC_RESET_PAYLOAD_MAX bytes); each
        worker answers in its info area of the command block (the inline
        slice in this process directly). Raises the first env's exception,
        as SyncVectorEnv does, or RuntimeError when a worker died or its
        answers overflowed its info area (make_vec(info_bytes=...))."""
        import cloudpickle
        if not isinstance(name, str):
            raise _lib.InvalidTypeError("attribute names are strings, not %r" % (name,))
        try:
            pay = cloudpickle.dumps((_ATTR, op, name, values, tuple(args), dict(kwargs or {})))
        except Exception as e:
            raise TypeError("%s(%r): the values cannot be pickled for the worker processes: "
                            "%s: %s" % (op, name, type(e).__name__, e)) from e
        if len(pay) > _lib.SR_PROC_RESET_PAYLOAD_MAX:
            raise ValueError("%s(%r): %d bytes pickled; process workers take at most %d"
                             % (op, name, len(pay), _lib.SR_PROC_RESET_PAYLOAD_MAX))
        ro = _lib.sr_pool_reset_opts()
        _lib.lib.sr_pool_reset_opts_init(ctypes.byref(ro))
        mask = np.zeros(self.num_envs, np.uint8)
        buf = ctypes.create_string_buffer(pay, len(pay))
        ro.flags = _lib.SR_RESET_F_MASK | _lib.SR_RESET_F_PAYLOAD
        ro.mask = mask.ctypes.data
        ro.payload, ro.payload_len = ctypes.cast(buf, ctypes.c_void_p), len(pay)
        self._call(_lib.lib.sr_pool_reset_ex, ctypes.byref(ro), ctypes.byref(self._pb))
        b = self._pb.contents
        s = b.first_seq & self._mask
        fault = (self._flags[s:s + b.n] & _lib.SR_SLOT_FAULT) != 0
        got = {}
        sl = self._slice
        ents = list(sl.infos or ()) if sl is not None else []
        if sl is not None:
            sl.infos = None
        for w, lw, addr, cap in self._outs:
            k = int(lw[0])
            if k == 0xffffffff:
                raise _lib.LibraryError(
                    -105, "%s(%r): worker %d's answers took %d bytes pickled, more than its "
                    "info area of %d (make_vec(info_bytes=...))" % (op, name, w, int(lw[1]), cap))
            if k:
                ents += pickle.loads(ctypes.string_at(addr, k))
        for e, kind, res in ents:
            if kind == _INFO_ATTR and not fault[e]:
                got[e] = res
        lost = [e for e in range(self.num_envs) if e not in got]
        if lost:
            raise _lib.LibraryError(
                -5, "%s(%r): envs %s lost their worker during the request (it was restarted: "
                "see fault_stats())" % (op, name, lost))
        for e in range(self.num_envs):
            ok, v = got[e]
            if not ok:
                raise v
        return None if op == "set" else tuple(got[e][1] for e in range(self.num_envs))

    def stats(self):
        """sr_pool_stats_get as a dict (steps, episodes, mean_return, ...,
        nonfinite_rows, nonfinite_env, check_finite)."""
        st = _lib.sr_pool_stats()
        _lib.check(_lib.lib.sr_pool_stats_get(self._pool, ctypes.byref(st)))
        return {k: getattr(st, k) for k, _ in st._fields_ if not k.startswith("reserved")}

    def fault_stats(self):
        """Faults so far: {'faults', 'restarts', 'fault_rows', 'last'}."""
        f = _lib.sr_pool_faults()
        _lib.check(_lib.lib.sr_pool_faults_get(self._pool, ctypes.byref(f)))
        return {"faults": f.faults, "restarts": f.restarts, "fault_rows": f.fault_rows,
                "last": f.last.decode(errors="replace")}

    # --- checkpoints (as stepring.VectorEnv's) ------------------------------
    def checkpoint(self, path, *, replay=False, backend="auto", wait=True):
        """Checkpoint the pool into @path (replaced atomically): each env
        pickled in its worker (the env object, its np_random included),
        its episode counters, the statistics and, with replay=True, the
        replay window. Call between steps. An env that cannot be pickled
        raises, naming it and why, and nothing is written. The snapshot is
        taken now; the file is written in the background unless
        backend='sync'. wait=True waits for the file and returns its status
        (a dict); wait=False returns None at once (see checkpoint_poll /
        checkpoint_wait)."""
        if backend not in _lib.CKPT_BACKENDS:
            raise ValueError("backend must be one of %s, not %r"
                             % (", ".join(_lib.CKPT_BACKENDS), backend))
        o = _lib.sr_ckpt_opts()
        _lib.lib.sr_ckpt_opts_init(ctypes.byref(o))
        o.flags |= _lib.SR_CKPT_F_BACKEND
        o.backend = _lib.CKPT_BACKENDS[backend]
        if replay:
            o.flags |= _lib.SR_CKPT_F_REPLAY
        self._call(_lib.lib.sr_pool_checkpoint, os.fsencode(path), ctypes.byref(o))
        return self._checkpoint_wait() if wait else None

    def _ckpt_status(self, fn):
        st = _lib.sr_ckpt_status()
        rc = fn(self._pool, ctypes.byref(st))
        d = {k: getattr(st, k) for k, _ in st._fields_ if not k.startswith("reserved")}
        d["state"] = _lib.CKPT_STATES.get(st.state, str(st.state))
        d["backend"] = (_lib.lib.sr_ckpt_backend_name(st.backend) or b"?").decode()
        return rc, d

    def checkpoint_poll(self):
        """(done, status): done is False while a checkpoint is being written.
        A failed checkpoint raises (once), with the reason."""
        rc, d = self._ckpt_status(_lib.lib.sr_pool_checkpoint_poll)
        if rc == -errno.EINPROGRESS:
            return False, d
        _lib.check(rc)
        return True, d

    def checkpoint_wait(self):
        """Wait for the checkpoint in flight; its status, or an exception
        if it failed."""
        return self._checkpoint_wait()

    def _checkpoint_wait(self):
        rc, d = self._ckpt_status(_lib.lib.sr_pool_checkpoint_wait)
        _lib.check(rc)
        return d

    def restore(self, path):
        """Restore the pool from a checkpoint of a pool of the same envs
        (env, num_envs, autoreset ...; any num_workers, inline or not), in
        this process or another: each worker unpickles its envs, and the
        next step() continues the saved trajectories exactly. The obs the
        policy acts on next is the last one returned before the checkpoint:
        keep it with your trainer's state. Raises (and changes nothing) on a
        missing, corrupt or mismatched file, or an env that does not
        unpickle."""
        self._call(_lib.lib.sr_pool_restore, os.fsencode(path))
        self._ended[:] = False

    def worker_pids(self):
        out = []
        for w in range(self._num_workers):
            st = _lib.sr_pool_worker_stats()
            _lib.check(_lib.lib.sr_pool_worker_stats_get(self._pool, w, ctypes.byref(st)))
            out.append(st.pid)
        return out

    def __del__(self):
        try:
            self._destroy()
        except Exception:
            pass
