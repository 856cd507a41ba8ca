"""The worker process of stepring.make_vec(env_fns=[...]) (process workers).

Started by the pool (posix_spawn) as `python _procworker.py LIBPATH`, never
by hand. It attaches to the pool's ring and command block through the C
library (stepring/proc.h), builds its slice of envs from the pickled env
factories (unpickled once, here), then loops: wait for a command (spin, then
a futex on shared memory, inside the C call), step or reset its envs,
write obs / reward / flags / prev links straight into numpy views of the
ring's columns, publish the rows, tell the pool. Any exception ends the
process with its traceback recorded for the pool, which publishes the
interrupted rows as fault rows and starts a new worker.
"""
import os
import sys
import time
import traceback


def _main():
    lib_path = sys.argv[1]
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, pkg_parent)
    os.environ["STEPRING_LIB"] = lib_path
    import ctypes
    import pickle

    import numpy as np

    from stepring import _lib

    lib = _lib.lib
    w = ctypes.c_void_p()
    info = _lib.sr_proc_info()
    rc = lib.sr_proc_worker_open(ctypes.byref(w), ctypes.byref(info))
    if rc:
        sys.stderr.write("stepring worker: %s\n" % lib.sr_last_error().decode())
        os._exit(2)
    try:
        _run(lib, _lib, w, info, np, ctypes, pickle)
    except BaseException:
        lib.sr_proc_worker_fail(w, traceback.format_exc().encode(errors="replace"))
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def _run(lib, _lib, w, info, np, ctypes, pickle):
    payload = ctypes.string_at(info.payload, info.payload_len)
    cfg = pickle.loads(payload)
    for p in reversed(cfg["sys_path"]):
        if p not in sys.path:
            sys.path.insert(1, p)
    import cloudpickle  # noqa: F401  (the factories were pickled with it)

    env_fns = pickle.loads(cfg["env_fns"])
    n, first, od = info.n_envs, info.first_env, info.obs_dim
    base = info.env_base + first
    envs = [env_fns[first + i]() for i in range(n)]
    ring = info.ring
    cap = lib.sr_ring_capacity(ring)
    mask = cap - 1
    asz = info.act_size

    def col(fn, ctype, width=1):
        addr = fn(ring)
        a = np.ctypeslib.as_array((ctype * (cap * width)).from_address(addr))
        return a.reshape(cap, width) if width > 1 else a

    obs_col = col(lib.sr_ring_obs_col, ctypes.c_float, od).reshape(cap, od)
    act_col = col(lib.sr_ring_action_col, ctypes.c_uint8, asz).reshape(cap, asz)
    rew_col = col(lib.sr_ring_reward_col, ctypes.c_float)
    term_col = col(lib.sr_ring_terminated_col, ctypes.c_uint8)
    trunc_col = col(lib.sr_ring_truncated_col, ctypes.c_uint8)
    flags_col = col(lib.sr_ring_flags_col, ctypes.c_uint8)
    env_col = col(lib.sr_ring_env_id_col, ctypes.c_uint32)
    prev_col = col(lib.sr_ring_prev_col, ctypes.c_uint64)
    num_envs = info.num_envs
    acts_all = (ctypes.c_uint8 * (num_envs * asz))
    NO_PREV = (1 << 64) - 1
    FIRST, PAD = 1, 2

    seed = info.seed
    restarts = info.restarts
    # The first reset of each env is seeded: Gymnasium's convention (seed + i)
    # at the start, a seed mixed from (seed, env, restarts) after a restart.
    first_seed = [int(seed + base + i) if restarts == 0 else
                  int(lib.sr_proc_seed(seed, base + i, restarts)) for i in range(n)]
    pending = [True] * n          # the seed above is still to be used
    done = [restarts > 0] * n     # after a restart: reset at the next step
    prev = [NO_PREV] * n
    ep_ret = [0.0] * n
    ep_len = [0] * n
    env_col_vals = np.arange(first, first + n, dtype=np.uint32)

    def do_reset(i):
        if pending[i]:
            pending[i] = False
            o, _ = envs[i].reset(seed=first_seed[i])
        else:
            o, _ = envs[i].reset()
        done[i] = False
        ep_ret[i] = 0.0
        ep_len[i] = 0
        return o

    cmd = _lib.sr_proc_cmd()
    wait = lib.sr_proc_worker_wait
    publish = lib.sr_ring_publish
    done_fn = lib.sr_proc_worker_done
    episode = lib.sr_proc_worker_episode
    perf = time.perf_counter_ns
    discrete = cfg["discrete"]
    act_dtype = np.int32 if discrete else np.float32
    lib.sr_proc_worker_ready(w)
    while wait(w, ctypes.byref(cmd)) == 0:
        seq = cmd.seq + first
        s = seq & mask
        rows = slice(s, s + n)
        t0 = perf()
        flags = [0] * n
        rews = [0.0] * n
        terms = [False] * n
        truncs = [False] * n
        prevs = [0] * n
        if cmd.kind == 1:  # SR_PROC_CMD_STEP
            raw = acts_all.from_address(cmd.actions)
            acts = np.frombuffer(raw, dtype=act_dtype).reshape(num_envs, -1)
            mine = acts[first:first + n]
            act_col[rows] = np.frombuffer(raw, dtype=np.uint8).reshape(num_envs, asz)[
                first:first + n]
            for i in range(n):
                q = seq + i
                if done[i]:
                    o = do_reset(i)
                    flags[i] = FIRST
                    prevs[i] = NO_PREV
                else:
                    a = int(mine[i, 0]) if discrete else mine[i]
                    o, r, te, tr, _ = envs[i].step(a)
                    r = float(r)
                    rews[i] = r
                    terms[i] = te
                    truncs[i] = tr
                    prevs[i] = prev[i]
                    ep_ret[i] += r
                    ep_len[i] += 1
                    if te or tr:
                        done[i] = True
                        episode(w, ep_ret[i], ep_len[i])
                prev[i] = q
                obs_col[s + i] = np.ravel(o)
        else:  # SR_PROC_CMD_RESET
            m = None
            if cmd.mask:
                m = np.ctypeslib.as_array((ctypes.c_uint8 * num_envs).from_address(cmd.mask))
            act_col[rows] = 0
            for i in range(n):
                q = seq + i
                if m is None or m[first + i]:
                    o = do_reset(i)
                    flags[i] = FIRST
                    prevs[i] = NO_PREV
                    prev[i] = q
                else:
                    # Not reset: repeat its last row's obs in a pad row.
                    o = (obs_col[prev[i] & mask].copy() if prev[i] != NO_PREV
                         else np.zeros(od, np.float32))
                    flags[i] = PAD
                    prevs[i] = prev[i]
                obs_col[s + i] = np.ravel(o)
        rew_col[rows] = rews
        term_col[rows] = terms
        trunc_col[rows] = truncs
        flags_col[rows] = flags
        env_col[rows] = env_col_vals
        prev_col[rows] = prevs
        t1 = perf()
        # R1: the rows are whole; publish (release) then tell the pool.
        publish(ring, seq, n)
        done_fn(w, n, t1 - t0)


if __name__ == "__main__":
    _main()
