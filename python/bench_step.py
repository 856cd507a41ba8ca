#!/usr/bin/env python3
"""Python step() throughput against the C pool, in the same run.

    STEPRING_LIB=build/libstepring.so python3 python/bench_step.py [--envs 64,1024,4096]

Method. For each num_envs, one configuration (env, sync mode, autoreset
next_step, seed 0, the same num_threads and bind) is timed two ways, in
the same process, interleaved round by round so that both see the same
machine load:

  C     a tight loop calling sr_pool_step through ctypes on a raw pool,
        with a preallocated int32 action buffer: no numpy work per step,
        only the ctypes call (about a microsecond);
  py    VectorEnv.step(actions) from stepring.make_vec with the same
        preallocated int32 actions: everything the binding does per step
        (action checks, the C call, numpy views of the batch, info dict).

Each round runs each side for --seconds; the figure is the median of
--rounds rounds, in env steps per second (num_envs * steps / time).
ratio = py / C. "py/C cpu" is the same ratio in env steps per second of
process CPU time (all threads): on an oversubscribed machine, where the
wall-clock figures mostly measure when the OS runs the workers, it shows
what the binding itself costs. The goal is ratio >= 0.7 at 1024 envs. For reference the
script also runs `stepring bench pool --json` (the C benchmark, own
process) when the CLI has it.
"""
import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stepring  # noqa: E402
from stepring import _lib  # noqa: E402

lib = _lib.lib


def c_pool(env, n, threads, seed):
    o = _lib.sr_pool_opts()
    lib.sr_pool_opts_init(ctypes.byref(o))
    o.env = env.encode()
    o.num_envs = n
    o.num_threads = threads
    o.batch_size = n
    o.flags |= _lib.SR_POOL_F_SEED
    o.seed = seed
    p = ctypes.c_void_p()
    _lib.check(lib.sr_pool_create(ctypes.byref(o), ctypes.byref(p)))
    return p.value


def time_c(p, actions, seconds):
    bp = ctypes.POINTER(_lib.sr_batch)()
    ref = ctypes.byref(bp)
    step = lib.sr_pool_step
    ptr = actions.ctypes.data
    it = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(16):
            rc = step(p, ptr, ref)
        it += 16
        if rc < 0:
            raise _lib.error_for(rc)
        t = time.perf_counter()
        if t >= deadline:
            return it / (t - t0), it / max(time.process_time() - c0, 1e-9)


def time_py(env, actions, seconds):
    step = env.step
    it = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(16):
            step(actions)
        it += 16
        t = time.perf_counter()
        if t >= deadline:
            return it / (t - t0), it / max(time.process_time() - c0, 1e-9)


def cli_reference(cli, env, n, threads, seconds):
    if not cli:
        return None
    cmd = [cli, "bench", "pool", "--env", env, "--envs", str(n), "--json",
           "--seconds", str(seconds), "--warmup", "0.2", "--cooldown", "0"]
    if threads:
        cmd += ["--threads", str(threads)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    for line in reversed(out.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def find_cli():
    here = os.path.dirname(os.path.abspath(_lib.path))
    cand = os.path.join(here, "stepring")
    if os.access(cand, os.X_OK):
        return cand
    return shutil.which("stepring")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Python step() vs the C pool")
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--envs", default="64,1024,4096")
    ap.add_argument("--threads", type=int, default=0, help="pool threads (0: one per core)")
    ap.add_argument("--seconds", type=float, default=0.5, help="per side per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-cli", action="store_true", help="skip `stepring bench pool`")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per size")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.envs.split(",")]
    cli = None if args.no_cli else find_cli()
    print("%s, %s, %d rounds x %.2f s per side, median"
          % (stepring.build_info(), args.env, args.rounds, args.seconds))
    print("%8s %14s %14s %7s %9s %16s" % ("envs", "C steps/s", "py steps/s", "py/C",
                                           "py/C cpu", "CLI bench pool"))
    rows = []
    for n in sizes:
        rng = np.random.default_rng(0)
        actions = np.ascontiguousarray(rng.integers(0, 2, n), dtype=np.int32)
        p = c_pool(args.env, n, args.threads, 0)
        env = stepring.make_vec(args.env, n, seed=0, num_threads=args.threads or None)
        try:
            bp = ctypes.POINTER(_lib.sr_batch)()
            _lib.check(lib.sr_pool_reset(p, ctypes.byref(bp)))
            env.reset()
            time_c(p, actions, 0.1)  # warm up both
            time_py(env, actions, 0.1)
            c_rates, py_rates, c_cpu, py_cpu = [], [], [], []
            for _ in range(args.rounds):
                w, c = time_c(p, actions, args.seconds)
                c_rates.append(w * n)
                c_cpu.append(c * n)
                w, c = time_py(env, actions, args.seconds)
                py_rates.append(w * n)
                py_cpu.append(c * n)
            threads = env.num_threads
        finally:
            env.close()
            lib.sr_pool_destroy(p)
        c_med, py_med = statistics.median(c_rates), statistics.median(py_rates)
        cpu_ratio = statistics.median(py_cpu) / statistics.median(c_cpu)
        ref = cli_reference(cli, args.env, n, args.threads, args.seconds)
        ref_sps = None
        if ref:
            for k in ("steps_per_sec", "steps_per_s"):
                if isinstance(ref.get(k), (int, float)):
                    ref_sps = ref[k]
                    break
        print("%8d %14.0f %14.0f %7.2f %9.2f %16s" % (n, c_med, py_med, py_med / c_med, cpu_ratio,
                                                     "%.0f" % ref_sps if ref_sps else "-"))
        rows.append({"env": args.env, "num_envs": n, "threads": threads,
                     "c_steps_per_s": c_med, "py_steps_per_s": py_med,
                     "ratio": py_med / c_med, "cpu_ratio": cpu_ratio,
                     "c_rounds": c_rates, "py_rounds": py_rates,
                     "c_steps_per_cpu_s": c_cpu, "py_steps_per_cpu_s": py_cpu,
                     "cli_bench_pool": ref})
    if args.json:
        for r in rows:
            print(json.dumps(r))
    goal = [r for r in rows if r["num_envs"] == 1024]
    if goal:
        print("goal py/C >= 0.70 at 1024 envs: %s (%.2f)"
              % ("met" if goal[0]["ratio"] >= 0.7 else "NOT met", goal[0]["ratio"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
