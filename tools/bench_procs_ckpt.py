"""What a checkpoint of a Python process pool costs: Gymnasium's CartPoleEnv
in stepring.make_vec(env_fns=...) worker processes, each env pickled in its
worker. Prints, over interleaved rounds (medians and ranges): the step
loop's stall (the snapshot: every env pickled and handed over), the whole
synchronous checkpoint, the restore, the file size, and a step of the pool
for scale. The C side, against a thread pool: stepring bench checkpoint
--procs.

usage: STEPRING_LIB=build/libstepring.so PYTHONPATH=python:<gymnasium> \\
       python3 tools/bench_procs_ckpt.py [--envs 1024] [--workers 2] [--rounds 7]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import stepring
    from gymnasium.envs.classic_control import CartPoleEnv

    kinds = {"inline": True, "isolated": False}
    envs = {k: stepring.make_vec(env_fns=[CartPoleEnv] * a.envs, num_workers=a.workers,
                                 seed=0, inline=v) for k, v in kinds.items()}
    fig = {k: {"snapshot_ms": [], "checkpoint_ms": [], "restore_ms": [], "step_ms": []}
           for k in kinds}
    size = {}
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        for e in envs.values():
            e.reset()
        for r in range(a.rounds):
            for k in (list(kinds) if r % 2 == 0 else list(kinds)[::-1]):
                e, path = envs[k], os.path.join(d, k + ".ckpt")
                t0 = time.perf_counter()
                for _ in range(10):
                    e.step(rng.integers(0, 2, a.envs))
                fig[k]["step_ms"].append((time.perf_counter() - t0) * 100)
                t0 = time.perf_counter()
                st = e.checkpoint(path, backend="sync")
                fig[k]["checkpoint_ms"].append((time.perf_counter() - t0) * 1e3)
                fig[k]["snapshot_ms"].append(st["ns_snapshot"] / 1e6)
                size[k] = st["bytes"]
                t0 = time.perf_counter()
                e.restore(path)
                fig[k]["restore_ms"].append((time.perf_counter() - t0) * 1e3)
    out = {"envs": a.envs, "workers": a.workers, "rounds": a.rounds}
    for k in kinds:
        out[k] = {m: {"median": statistics.median(v), "min": min(v), "max": max(v)}
                  for m, v in fig[k].items()}
        out[k]["bytes"] = size[k]
    if a.json:
        print(json.dumps(out))
    else:
        print("CartPoleEnv x %d in %d workers, %d rounds: median [min-max] ms" %
              (a.envs, a.workers, a.rounds))
        for k in kinds:
            print("%-9s " % k + "  ".join(
                "%s %.1f [%.1f-%.1f]" % (m, out[k][m]["median"], out[k][m]["min"],
                                         out[k][m]["max"]) for m in fig[k]) +
                  "  file %d bytes" % size[k])
    for e in envs.values():
        e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
