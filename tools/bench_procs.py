#!/usr/bin/env python3
"""Python envs: stepring process workers against Gymnasium's vector envs.

The same env class (Gymnasium's CartPoleEnv), 64 envs, in one run:
stepring.make_vec(env_fns=..., num_workers=2) (worker 0's envs inline, in
this process, and one worker process: the default), the same with
inline=False ("isolated": two worker processes), gymnasium.vector.SyncVectorEnv
and gymnasium.vector.AsyncVectorEnv(shared_memory=True). Rounds are
interleaved (the machine is shared); each round times every contender on
the same random actions; the ratios are taken per round and their medians
reported. Goals (docs/procs.md): >= 1.6x SyncVectorEnv, >= 5x
AsyncVectorEnv.

  STEPRING_LIB=build/libstepring.so PYTHONPATH=python:<gymnasium> \\
      /usr/bin/python3 tools/bench_procs.py [--envs 64] [--steps 300] [--rounds 5]
"""
import argparse
import json
import statistics
import time

import numpy as np
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

import stepring


def rate(envs, acts, steps):
    envs.reset(seed=0)
    for i in range(20):
        envs.step(acts[i % len(acts)])
    t0 = time.perf_counter()
    for i in range(steps):
        envs.step(acts[i % len(acts)])
    return envs.num_envs * steps / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--async-steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    n = a.envs
    acts = np.random.default_rng(0).integers(0, 2, (64, n))
    makers = {
        "stepring": lambda: stepring.make_vec(env_fns=[CartPoleEnv] * n,
                                              num_workers=a.workers, seed=0),
        "isolated": lambda: stepring.make_vec(env_fns=[CartPoleEnv] * n,
                                              num_workers=a.workers, seed=0, inline=False),
        "sync": lambda: gym.vector.SyncVectorEnv([CartPoleEnv] * n),
        "async": lambda: gym.vector.AsyncVectorEnv([CartPoleEnv] * n, shared_memory=True),
    }
    res = {k: [] for k in makers}
    for r in range(a.rounds):
        keys = list(makers)
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            e = makers[k]()
            res[k].append(rate(e, acts, a.async_steps if k == "async" else a.steps))
            e.close()
        print("round %d: stepring %.0f  isolated %.0f  sync %.0f  async %.0f env steps/s  "
              "x sync %.2f  x async %.2f  isolated: x sync %.2f  x async %.2f"
              % (r, res["stepring"][-1], res["isolated"][-1], res["sync"][-1],
                 res["async"][-1], res["stepring"][-1] / res["sync"][-1],
                 res["stepring"][-1] / res["async"][-1],
                 res["isolated"][-1] / res["sync"][-1],
                 res["isolated"][-1] / res["async"][-1]), flush=True)
    vs_sync = [s / y for s, y in zip(res["stepring"], res["sync"])]
    vs_async = [s / y for s, y in zip(res["stepring"], res["async"])]
    iso_sync = [s / y for s, y in zip(res["isolated"], res["sync"])]
    iso_async = [s / y for s, y in zip(res["isolated"], res["async"])]
    print(json.dumps({
        "bench": "procs_python", "env": "gymnasium CartPoleEnv", "envs": n,
        "workers": a.workers, "rounds": a.rounds,
        "stepring_steps_per_s": round(statistics.median(res["stepring"])),
        "sync_steps_per_s": round(statistics.median(res["sync"])),
        "async_steps_per_s": round(statistics.median(res["async"])),
        "x_sync_median": round(statistics.median(vs_sync), 3),
        "x_async_median": round(statistics.median(vs_async), 3),
        "x_sync_min": round(min(vs_sync), 3), "x_sync_max": round(max(vs_sync), 3),
        "isolated_steps_per_s": round(statistics.median(res["isolated"])),
        "isolated_x_sync_median": round(statistics.median(iso_sync), 3),
        "isolated_x_async_median": round(statistics.median(iso_async), 3),
        "goal_x_sync": 1.6, "goal_x_async": 5.0}))


if __name__ == "__main__":
    main()
