"""The worker side of stepring.make_vec(env_fns=[...]) (process workers).

A worker process is started by the pool (posix_spawn) as
`python _procworker.py LIBPATH`, never by hand. It attaches to the pool's
ring and command block through the C library (stepring/proc.h), builds its
slice of envs from the pickled env factories (unpickled once, here), then
loops: wait for a command (spin, then a futex on shared memory, inside the
C call), step or reset its envs, write obs / reward / flags / prev links
straight into numpy views of the ring's columns, publish the rows, tell the
pool. Any exception ends the process with its traceback recorded for the
pool, which publishes the interrupted rows as fault rows and starts a new
worker.

`Slice` is the part that steps envs into the ring: the worker processes
use it, and so does the trainer's process for worker 0's slice when the
pool runs it inline (stepring.procs, inline=True).

Per step and env the loop makes the env's step call and a few list stores;
everything that touches numpy is done once per command for the whole slice
(one assignment per column: a list of n observations into the obs rows,
the rewards, the flags, ...), since a numpy item assignment costs about as
much as a small env's step.
"""
import os
import sys
import time
import traceback

_F32_MAX = 3.4028234663852886e38  # larger rewards are infinite in the ring's float32

NO_PREV = (1 << 64) - 1
FIRST, PAD, FINAL = 1, 2, 4
CMD_STEP = 1
F_SEED, F_SEEDS, F_PAYLOAD = 1 << 1, 1 << 2, 1 << 4  # SR_RESET_F_*
CMD_SAVE, CMD_LOAD, CMD_COMMIT = 4, 5, 6  # checkpoints (stepring/proc.h)
# A reset payload of this tuple, ATTR + (op, name, values, args, kwargs),
# is an attribute request (ProcVectorEnv.get_attr / set_attr / call) with
# an empty mask: no env resets; each env answers (env, INFO_ATTR, (ok,
# value)) through the info channel.
ATTR = "__stepring_attr__"
INFO_ATTR = 2
_EINVAL, _EBADMSG, _ENOBUFS = 22, 74, 105
NEXT_STEP, SAME_STEP, DISABLED = 0, 1, 2  # enum sr_autoreset


class Slice:
    """Envs [info.first_env, info.first_env + info.n_envs) of a pool,
    stepped into its ring. `envs` are built from env_fns by the caller and
    seeded at their first reset: Gymnasium's convention (seed + env index)
    before any restart, sr_proc_seed(seed, env, restarts) after one.

    Autoreset modes, as gymnasium.vector.SyncVectorEnv and the C worker:
    NEXT_STEP resets an env whose episode ended at its next step (a FIRST
    row, reward 0); SAME_STEP resets it in the step that ended it: the
    batch row holds the reset obs (FIRST) with the step's reward and flags,
    and the step's own row moves to an extra ring slot flagged FINAL (its
    obs in the final-obs area too); DISABLED steps nothing for an ended env
    until a reset command resets it: the row repeats its last obs and flags
    as a PAD row."""

    def __init__(self, lib, info, env_fns, discrete, obs_shape, out=False, seeded=True):
        import ctypes

        import numpy as np

        self.np, self.ctypes, self.lib = np, ctypes, lib
        self.n = n = info.n_envs
        self.first = first = info.first_env
        self.num_envs = info.num_envs
        self.asz = info.act_size
        self.od = od = info.obs_dim
        self.restarts = info.restarts
        self.mode = info.autoreset
        self.discrete = discrete
        self.ring = ring = info.ring
        self.cap = cap = lib.sr_ring_capacity(ring)
        self.mask = cap - 1
        self.base = base = info.env_base + first
        self.envs = [env_fns[first + i]() for i in range(n)]
        self.step_fns = [e.step for e in self.envs]

        def col(fn, ctype, width=1):
            a = np.ctypeslib.as_array((ctype * (cap * width)).from_address(fn(ring)))
            return a.reshape(cap, width) if width > 1 else a

        self.obs_col = col(lib.sr_ring_obs_col, ctypes.c_float, od).reshape(cap, od)
        # The same rows in the env's observation shape: a list of n
        # observations goes in with one assignment (cast to float32).
        self.obs_rows = self.obs_col.reshape((cap,) + tuple(obs_shape))
        self.act_col = col(lib.sr_ring_action_col, ctypes.c_uint8, self.asz).reshape(
            cap, self.asz)
        self.rew_col = col(lib.sr_ring_reward_col, ctypes.c_float)
        self.term_col = col(lib.sr_ring_terminated_col, ctypes.c_uint8)
        self.trunc_col = col(lib.sr_ring_truncated_col, ctypes.c_uint8)
        self.flags_col = col(lib.sr_ring_flags_col, ctypes.c_uint8)
        self.env_col = col(lib.sr_ring_env_id_col, ctypes.c_uint32)
        self.prev_col = col(lib.sr_ring_prev_col, ctypes.c_uint64)
        self.env_vals = np.arange(first, first + n, dtype=np.uint32)
        # The final-obs area of the command block (SAME_STEP, or
        # SR_POOL_F_FINAL_OBS): one row per env of the pool.
        self.final = None
        if info.final_obs:
            self.final = np.ctypeslib.as_array(
                (ctypes.c_float * (self.num_envs * od)).from_address(info.final_obs)).reshape(
                    (self.num_envs,) + tuple(obs_shape))
        self.extra_seq = ctypes.c_uint64()
        seed, r = info.seed, info.restarts
        self.first_seed = [int(seed + base + i) if r == 0 else
                           int(lib.sr_proc_seed(seed, base + i, r)) for i in range(n)]
        # The first seed is still to be used. A pool made without a seed
        # resets its envs the first time with seed=None, as SyncVectorEnv
        # does (each env draws its own entropy); after a restart they are
        # seeded from (the pool's random seed, env, restarts) all the same.
        self.pending = [bool(seeded or r > 0)] * n
        # After a restart every env starts over: a reset at its next step
        # (NEXT_STEP, SAME_STEP), or truncated pad rows until a reset
        # command resets it (DISABLED).
        self.done = [r > 0] * n
        self.done_term = [False] * n
        self.done_trunc = [r > 0] * n
        self.prev = [NO_PREV] * n
        self.ep_ret = [0.0] * n
        self.ep_len = [0] * n
        # Each env's last obs (a pad row repeats it); zeros before any.
        zero = np.zeros(tuple(obs_shape), np.float32)
        self.obs_l = [zero] * n
        self._act_addr = None
        self._mask_addr = None
        self._staged = None  # LOAD: (envs, records) until COMMIT
        # Env infos: the non-empty dicts of the last command, as (env,
        # kind, dict), kind 0 the row's info, 1 a same_step final info. A
        # worker process pickles them into its out area of the command
        # block (u32 length, then the bytes; length 0: none), only when
        # there are some; the inline slice keeps them in self.infos.
        self.infos = None
        self.out_len = None
        if out and info.out and info.out_size > 8:
            self.out_addr = info.out + 8
            self.out_cap = info.out_size - 8
            self.out_len = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(info.out))
            self.out_len[0] = 0

    def _reset(self, i, seed=None, options=None):
        if seed is not None:
            self.pending[i] = False
            o, inf = self.envs[i].reset(seed=seed, options=options)
        elif self.pending[i]:
            self.pending[i] = False
            o, inf = self.envs[i].reset(seed=self.first_seed[i], options=options)
        elif options is not None:
            o, inf = self.envs[i].reset(options=options)
        else:
            o, inf = self.envs[i].reset()
        self.done[i] = False
        self.ep_ret[i] = 0.0
        self.ep_len[i] = 0
        return o, inf

    def _actions(self, addr):
        """This slice's actions of the command block (a view, made once)."""
        if addr != self._act_addr:
            np, ct = self.np, self.ctypes
            raw = (ct.c_uint8 * (self.num_envs * self.asz)).from_address(addr)
            u8 = np.frombuffer(raw, np.uint8).reshape(self.num_envs, self.asz)
            self._act_u8 = u8[self.first:self.first + self.n]
            typed = np.frombuffer(raw, np.int32 if self.discrete else np.float32)
            typed = typed.reshape(self.num_envs, -1)[self.first:self.first + self.n]
            self._act_typed = typed[:, 0] if self.discrete else typed
            self._act_addr = addr
        return self._act_u8, self._act_typed

    def _reset_args(self, cmd):
        """A reset of sr_pool_reset_ex: each env's seed (None: not
        reseeded) and the options dict (unpickled once per command)."""
        rf, n = cmd.reset_flags, self.n
        seeds, opts = [None] * n, None
        if rf & F_SEED:
            # Gymnasium's rule: env i from seed + i (the pool's index).
            seeds = [cmd.reset_seed + self.base + i for i in range(n)]
        elif rf & F_SEEDS:
            np, ct = self.np, self.ctypes
            sv = np.ctypeslib.as_array((ct.c_uint64 * self.num_envs).from_address(cmd.seeds))
            sm = (np.ctypeslib.as_array((ct.c_uint8 * self.num_envs).from_address(
                cmd.seed_mask)) if cmd.seed_mask else None)
            e0 = self.first
            seeds = [int(sv[e0 + i]) if sm is None or sm[e0 + i] else None for i in range(n)]
        if rf & F_PAYLOAD and cmd.payload_len:
            import pickle
            opts = pickle.loads(self.ctypes.string_at(cmd.payload, cmd.payload_len))
        return seeds, opts

    def run(self, w, cmd):
        """One command (the rows of seq cmd.seq + env), published."""
        lib, n = self.lib, self.n
        kind, actions, mask_addr = cmd.kind, cmd.actions, cmd.mask
        seq = cmd.seq + self.first
        s = seq & self.mask
        rows = slice(s, s + n)
        done, prev, obs_l = self.done, self.prev, self.obs_l
        fin = None
        ents = []  # (env, kind, info) of the non-empty infos
        if kind == CMD_STEP:
            u8, typed = self._actions(actions)
            self.act_col[rows] = u8
            # Discrete: Python ints; Box: one row per env (a copy: an env
            # may keep its action).
            acts = typed.tolist() if self.discrete else list(typed.copy())
            rews, terms, truncs = [0.0] * n, [False] * n, [False] * n
            flags, prevs = [0] * n, [0] * n
            ep_ret, ep_len, step_fns = self.ep_ret, self.ep_len, self.step_fns
            episode = lib.sr_proc_worker_episode
            mode, final = self.mode, self.final
            for i in range(n):
                if done[i]:
                    if mode == DISABLED:
                        # Not stepped until reset: its last obs and flags
                        # again, in a pad row.
                        terms[i] = self.done_term[i]
                        truncs[i] = self.done_trunc[i]
                        flags[i] = PAD
                        prevs[i] = prev[i]
                        continue
                    obs_l[i], inf = self._reset(i)
                    flags[i] = FIRST
                    prevs[i] = NO_PREV
                else:
                    o, r, te, tr, inf = step_fns[i](acts[i])
                    obs_l[i] = o
                    rews[i] = r
                    terms[i] = te
                    truncs[i] = tr
                    prevs[i] = prev[i]
                    if abs(r) <= _F32_MAX:  # NaN, inf (in float32) never enter the return
                        ep_ret[i] += r
                    ep_len[i] += 1
                    if te or tr:
                        done[i] = True
                        self.done_term[i] = te
                        self.done_trunc[i] = tr
                        episode(w, float(ep_ret[i]), ep_len[i])
                        if final is not None:
                            final[self.first + i] = o
                        if mode == SAME_STEP:
                            # The step's row goes to an extra slot; the
                            # batch row starts the next episode.
                            if fin is None:
                                fin = []
                            fin.append((i, o, prevs[i]))
                            if inf:
                                ents.append((self.first + i, 1, inf))
                            obs_l[i], inf = self._reset(i)
                            flags[i] = FIRST
                            prevs[i] = NO_PREV
                if inf:
                    ents.append((self.first + i, 0, inf))
                prev[i] = seq + i
        else:  # reset: every env, or where the mask byte is set
            m = None
            if mask_addr:
                np, ct = self.np, self.ctypes
                m = np.ctypeslib.as_array((ct.c_uint8 * self.num_envs).from_address(
                    mask_addr))[self.first:self.first + n].tolist()
            seeds, opts = self._reset_args(cmd) if cmd.reset_flags else ([None] * n, None)
            if type(opts) is tuple and opts and opts[0] == ATTR:
                self._attr(opts[1:], ents)
                m = [0] * n  # an attribute request resets nothing
            self.act_col[rows] = 0
            rews, terms, truncs = 0.0, 0, 0
            flags, prevs = [0] * n, [0] * n
            for i in range(n):
                if m is None or m[i]:
                    obs_l[i], inf = self._reset(i, seeds[i], opts)
                    if inf:
                        ents.append((self.first + i, 0, inf))
                    self.done_term[i] = self.done_trunc[i] = False
                    flags[i] = FIRST
                    prevs[i] = NO_PREV
                    prev[i] = seq + i
                else:
                    # Not reset: its last obs again, in a pad row.
                    flags[i] = PAD
                    prevs[i] = prev[i]
        self.obs_rows[rows] = obs_l
        self.rew_col[rows] = rews
        self.term_col[rows] = terms
        self.trunc_col[rows] = truncs
        self.flags_col[rows] = flags
        self.env_col[rows] = self.env_vals
        self.prev_col[rows] = prevs
        if fin is not None:
            self._finals(s, fin, rews, terms, truncs)
        if self.out_len is not None:
            if ents or self.out_len[0]:
                self._put_infos(ents)
        else:
            self.infos = ents or None
        # R1: the rows are whole (and the infos written: a row published
        # means its infos are whole too); publish (release).
        lib.sr_ring_publish(self.ring, seq, n)

    def _attr(self, req, ents):
        """An attribute request on every env of the slice, as SyncVectorEnv
        makes it on its envs: get or call (env.get_wrapper_attr(name), called
        with the arguments when callable, as SyncVectorEnv.get_attr is its
        call) or set (env.set_wrapper_attr(name,
        values[env])). Each env's answer goes into @ents as (env,
        INFO_ATTR, (True, value)) or (env, INFO_ATTR, (False, exception)),
        checked to pickle here (the caller pickles @ents whole). An env whose
        first reset is still to come answers np_random_seed with the seed
        that reset will use; setting its np_random makes that reset keep
        the generator set (as SyncVectorEnv's envs keep it)."""
        import pickle

        op, name, values, args, kwargs = req
        for i, env in enumerate(self.envs):
            e = self.first + i
            try:
                if op == "set":
                    env.set_wrapper_attr(name, values[e])
                    if name == "np_random":
                        self.pending[i] = False
                    res = (True, None)
                elif name == "np_random_seed" and self.pending[i]:
                    res = (True, self.first_seed[i])
                else:
                    v = env.get_wrapper_attr(name)
                    res = (True, v(*args, **kwargs) if callable(v) else v)
            except Exception as ex:  # noqa: BLE001 - the caller raises it
                res = (False, ex)
            try:
                pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as ex:  # noqa: BLE001
                res = (False, TypeError("env %d's %s %r cannot be pickled back to the trainer: "
                                        "%s: %s" % (e, "answer to" if res[0] else "error of",
                                                    name, type(ex).__name__, ex)))
            ents.append((e, INFO_ATTR, res))

    # --- checkpoints: SAVE, LOAD, COMMIT ------------------------------------
    # The exchange area (stepring/proc.h): n 32-byte records of the envs'
    # bookkeeping, n u64 lengths, then each env's state: the pickled tuple
    # (env, its first seed if its first reset is still to come, its last
    # obs), padded to 8 bytes. The env object carries its np_random, so an
    # env unpickled elsewhere continues exactly.

    def xchg(self, w, kind, arg):
        """A checkpoint command (kind CMD_SAVE, CMD_LOAD, CMD_COMMIT with
        arg 1 to apply, 0 to drop). Never raises: a failure is the
        command's result (sr_proc_worker_xchg_end), the pool's error."""
        end = self.lib.sr_proc_worker_xchg_end
        try:
            if kind == CMD_SAVE:
                self._save(w)
            elif kind == CMD_LOAD:
                self._load(w)
            elif kind == CMD_COMMIT:
                self._commit(bool(arg))
        except Exception as e:  # noqa: BLE001 - reported, not raised
            self._staged = None
            if kind != CMD_COMMIT:
                end(w, -_EBADMSG, 0, ("%s: %s" % (type(e).__name__, e)).encode(
                    errors="replace"))

    def _area(self, w):
        ct = self.ctypes
        a, cap = ct.c_void_p(), ct.c_size_t()
        rc = self.lib.sr_proc_worker_xchg(w, ct.byref(a), ct.byref(cap))
        if rc:
            raise OSError(-rc, self.lib.sr_last_error().decode(errors="replace"))
        return a.value or 0, cap.value

    @staticmethod
    def _rec_dtype(np):
        return np.dtype([("prev", "<u8"), ("ep_len", "<u8"), ("ep_ret", "<f8"),
                         ("elapsed", "<u4"), ("done", "u1"), ("term", "u1"),
                         ("trunc", "u1"), ("pad", "u1")])

    def _save(self, w):
        import pickle

        import cloudpickle

        np, end, n = self.np, self.lib.sr_proc_worker_xchg_end, self.n
        addr, cap = self._area(w)
        blobs = []
        for i, env in enumerate(self.envs):
            rec = (env, self.first_seed[i] if self.pending[i] else None, self.obs_l[i])
            try:
                try:
                    # pickle's C pickler, several times faster; cloudpickle
                    # for what it cannot take (a class defined in a function).
                    blobs.append(pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL))
                except Exception:  # noqa: BLE001
                    blobs.append(cloudpickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception as e:  # noqa: BLE001 - the env's own reason
                end(w, -_EINVAL, 0, ("env %d (%s) cannot be pickled: %s: %s" % (
                    self.first + i, type(env).__name__, type(e).__name__, e)).encode(
                        errors="replace"))
                return
        recs = np.zeros(n, self._rec_dtype(np))
        recs["prev"] = self.prev
        recs["ep_len"] = self.ep_len
        recs["ep_ret"] = self.ep_ret
        recs["done"] = self.done
        recs["term"] = self.done_term
        recs["trunc"] = self.done_trunc
        lens = np.array([len(b) for b in blobs], "<u8")
        data = b"".join([recs.tobytes(), lens.tobytes()] +
                        [b + b"\0" * (-len(b) % 8) for b in blobs])
        if len(data) > cap:
            end(w, -_ENOBUFS, len(data), None)  # the pool grows the area, asks again
            return
        self.ctypes.memmove(addr, data, len(data))
        end(w, 0, len(data), None)

    def _load(self, w):
        import pickle

        np, ct, end, n = self.np, self.ctypes, self.lib.sr_proc_worker_xchg_end, self.n
        self._staged = None
        addr, cap = self._area(w)
        if n * 40 > cap:
            end(w, -_EBADMSG, 0, b"the exchange area is too small")
            return
        head = ct.string_at(addr, n * 40) if n else b""
        recs = np.frombuffer(head[:n * 32], self._rec_dtype(np)).copy()
        lens = np.frombuffer(head[n * 32:], "<u8").tolist()
        off, staged = n * 40, []
        for i in range(n):
            if lens[i] > cap - off:
                end(w, -_EBADMSG, 0, b"env %d's record is longer than the area" % (
                    self.first + i))
                return
            try:
                env, seed, last = pickle.loads(ct.string_at(addr + off, lens[i]))
            except Exception as e:  # noqa: BLE001
                end(w, -_EBADMSG, 0, ("env %d's saved state does not unpickle: %s: %s" % (
                    self.first + i, type(e).__name__, e)).encode(errors="replace"))
                return
            want = type(self.envs[i]).__qualname__
            if type(env).__qualname__ != want:
                end(w, -_EINVAL, 0, ("env %d is a %s in the checkpoint, a %s in this "
                                     "pool" % (self.first + i, type(env).__qualname__,
                                               want)).encode(errors="replace"))
                return
            staged.append((env, seed, last))
            off += lens[i] + (-lens[i] % 8)
        self._staged = (staged, recs)
        end(w, 0, 0, None)

    def _commit(self, apply):
        staged, self._staged = getattr(self, "_staged", None), None
        if not apply or staged is None:
            return
        envs, recs = staged
        old, self.envs = self.envs, [e for e, _, _ in envs]
        self.step_fns = [e.step for e in self.envs]
        for i, (_, seed, last) in enumerate(envs):
            self.pending[i] = seed is not None
            if seed is not None:
                self.first_seed[i] = seed
            self.obs_l[i] = last
        self.prev = recs["prev"].tolist()
        self.ep_len = recs["ep_len"].tolist()
        self.ep_ret = recs["ep_ret"].tolist()
        self.done = [bool(x) for x in recs["done"]]
        self.done_term = [bool(x) for x in recs["term"]]
        self.done_trunc = [bool(x) for x in recs["trunc"]]
        for e in old:
            try:
                e.close()
            except Exception:  # noqa: BLE001 - the old envs are gone either way
                pass
    def _put_infos(self, ents):
        """The infos into the out area (pickled once per command, only when
        an env returned a non-empty info); too large: length 0xffffffff and
        the size needed, and the trainer warns."""
        if not ents:
            self.out_len[0] = 0
            return
        import pickle
        blob = pickle.dumps(ents, protocol=pickle.HIGHEST_PROTOCOL)
        if len(blob) > self.out_cap:
            self.out_len[1] = min(len(blob), 0xfffffffe)
            self.out_len[0] = 0xffffffff
            return
        self.ctypes.memmove(self.out_addr, blob, len(blob))
        self.out_len[0] = len(blob)

    def _finals(self, s, fin, rews, terms, truncs):
        """SAME_STEP: the ended envs' step rows (final obs, the step's
        action, reward and flags, its prev link) in extra slots reserved
        now, flagged FINAL and published (the C worker's order: before the
        batch rows). If this process dies before publishing them, the pool
        publishes the reserved gap as pad rows."""
        k, m = len(fin), self.mask
        self.lib.sr_ring_reserve(self.ring, k, 0, self.ctypes.byref(self.extra_seq))
        e = self.extra_seq.value
        for j, (i, o, pv) in enumerate(fin):
            se = (e + j) & m
            self.obs_rows[se] = o
            self.act_col[se] = self.act_col[s + i]
            self.rew_col[se] = rews[i]
            self.term_col[se] = terms[i]
            self.trunc_col[se] = truncs[i]
            self.flags_col[se] = FINAL
            self.env_col[se] = self.first + i
            self.prev_col[se] = pv
        self.lib.sr_ring_publish(self.ring, e, k)


def _main():
    lib_path = sys.argv[1]
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, pkg_parent)
    os.environ["STEPRING_LIB"] = lib_path
    import ctypes

    from stepring import _lib

    lib = _lib.lib
    w = ctypes.c_void_p()
    info = _lib.sr_proc_info()
    rc = lib.sr_proc_worker_open(ctypes.byref(w), ctypes.byref(info))
    if rc:
        sys.stderr.write("stepring worker: %s\n" % lib.sr_last_error().decode())
        os._exit(2)
    try:
        _run(lib, _lib, w, info, ctypes)
    except BaseException:
        lib.sr_proc_worker_fail(w, traceback.format_exc().encode(errors="replace"))
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def _run(lib, _lib, w, info, ctypes):
    import pickle

    cfg = pickle.loads(ctypes.string_at(info.payload, info.payload_len))
    for p in reversed(cfg["sys_path"]):
        if p not in sys.path:
            sys.path.insert(1, p)
    import cloudpickle  # noqa: F401  (the factories were pickled with it)

    env_fns = pickle.loads(cfg["env_fns"])
    sl = Slice(lib, info, env_fns, cfg["discrete"], cfg["obs_shape"], out=True,
               seeded=cfg.get("seeded", True))
    cmd = _lib.sr_proc_cmd()
    cmd_ref = ctypes.byref(cmd)
    wait, done_fn, run = lib.sr_proc_worker_wait, lib.sr_proc_worker_done, sl.run
    perf = time.perf_counter_ns
    n = sl.n
    lib.sr_proc_worker_ready(w)
    while wait(w, cmd_ref) == 0:
        t0 = perf()
        if cmd.kind >= CMD_SAVE:  # a checkpoint: no rows
            sl.xchg(w, cmd.kind, cmd.seq)
            done_fn(w, 0, perf() - t0)
            continue
        run(w, cmd)
        done_fn(w, n, perf() - t0)


if __name__ == "__main__":
    _main()
