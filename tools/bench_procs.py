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

Each round first times SyncVectorEnv pinned to each allowed CPU and
prints the speeds: on a virtual machine one vCPU can be much slower than
another for a while, which moves every contender's figure (see
docs/procs.md, "Figures").

  STEPRING_LIB=build/libstepring.so PYTHONPATH=python:<gymnasium> \\
      /usr/bin/python3 tools/bench_procs.py [--envs 64] [--steps 300] [--rounds 5]

--infos adds two contenders: stepring and SyncVectorEnv on a CartPoleEnv
whose step returns a non-empty info dict ({"k": step count}) every step,
which the process workers pickle into their info areas once per command
(the plain CartPoleEnv returns {}: nothing is pickled), and reports what
that costs.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

import stepring


class InfoCartPole(CartPoleEnv):
    """CartPoleEnv with a non-empty info dict at every step."""

    def reset(self, *, seed=None, options=None):
        self.k = 0
        return super().reset(seed=seed, options=options)

    def step(self, a):
        obs, r, te, tr, _ = super().step(a)
        self.k += 1
        return obs, r, te, tr, {"k": self.k}


def rate(envs, acts, steps):
    envs.reset(seed=0)
    for i in range(20):
        envs.step(acts[i % len(acts)])
    t0 = time.perf_counter()
    for i in range(steps):
        envs.step(acts[i % len(acts)])
    return envs.num_envs * steps / (time.perf_counter() - t0)


def cpu_speeds(n, acts, steps=200):
    """SyncVectorEnv's steps/s pinned to each allowed CPU in turn. The
    vCPUs of a virtual machine need not be equally fast (another guest on
    the host's sibling thread): a contender's figure then depends on which
    CPU it got, and stepring's sync step waits for the slower of its two
    parties. Printed so that the rounds can be read."""
    if not hasattr(os, "sched_setaffinity"):
        return {}
    mine = os.sched_getaffinity(0)
    env = gym.vector.SyncVectorEnv([CartPoleEnv] * n)
    env.reset(seed=0)
    out = {}
    try:
        for cpu in sorted(mine):
            os.sched_setaffinity(0, {cpu})
            for i in range(20):
                env.step(acts[i % len(acts)])
            t0 = time.perf_counter()
            for i in range(steps):
                env.step(acts[i % len(acts)])
            out[cpu] = round(n * steps / (time.perf_counter() - t0))
    finally:
        os.sched_setaffinity(0, mine)
        env.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--async-steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--infos", action="store_true",
                    help="also time envs that return an info dict at every step")
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
    if a.infos:
        makers["infos"] = lambda: stepring.make_vec(env_fns=[InfoCartPole] * n,
                                                    num_workers=a.workers, seed=0)
        makers["sync_infos"] = lambda: gym.vector.SyncVectorEnv([InfoCartPole] * n)
    res = {k: [] for k in makers}
    speeds = []
    for r in range(a.rounds):
        sp = cpu_speeds(n, acts)
        speeds.append(sp)
        if len(sp) > 1:
            print("round %d: SyncVectorEnv pinned to each CPU: %s steps/s (slowest/fastest %.2f)"
                  % (r, ", ".join("cpu%d %d" % kv for kv in sp.items()),
                     min(sp.values()) / max(sp.values())), flush=True)
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
        if a.infos:
            print("round %d: with infos: stepring %.0f  sync %.0f env steps/s  x stepring "
                  "without %.2f  x sync %.2f" % (r, res["infos"][-1], res["sync_infos"][-1],
                                                 res["infos"][-1] / res["stepring"][-1],
                                                 res["infos"][-1] / res["sync_infos"][-1]),
                  flush=True)
    vs_sync = [s / y for s, y in zip(res["stepring"], res["sync"])]
    vs_async = [s / y for s, y in zip(res["stepring"], res["async"])]
    iso_sync = [s / y for s, y in zip(res["isolated"], res["sync"])]
    iso_async = [s / y for s, y in zip(res["isolated"], res["async"])]
    extra = {}
    if a.infos:
        # What a worker adds per command when its envs return infos: one
        # pickle of its slice's entries, and one unpickle by the trainer
        # (timed directly: the end-to-end difference drowns in the noise).
        import pickle
        per = n // a.workers
        ents = [(i, 0, {"k": 100 + i}) for i in range(per)]
        reps = 2000
        t0 = time.perf_counter()
        for _ in range(reps):
            pickle.loads(pickle.dumps(ents, protocol=pickle.HIGHEST_PROTOCOL))
        us = (time.perf_counter() - t0) / reps * 1e6
        print("pickle + unpickle of one worker's infos (%d envs, {'k': int} each): %.2f us a "
              "step (%.0f bytes)" % (per, us, len(pickle.dumps(ents, protocol=5))), flush=True)
        extra = {"infos_pickle_us_per_step": round(us, 2),
            "infos_steps_per_s": round(statistics.median(res["infos"])),
            "sync_infos_steps_per_s": round(statistics.median(res["sync_infos"])),
            "infos_x_without_median": round(statistics.median(
                [x / y for x, y in zip(res["infos"], res["stepring"])]), 3),
            "infos_x_sync_infos_median": round(statistics.median(
                [x / y for x, y in zip(res["infos"], res["sync_infos"])]), 3)}
    print(json.dumps(dict({
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
        "goal_x_sync": 1.6, "goal_x_async": 5.0,
        "cpu_speed_ratio_median": round(statistics.median(
            [min(sp.values()) / max(sp.values()) for sp in speeds if len(sp) > 1] or [1.0]), 3)},
        **extra)))


if __name__ == "__main__":
    main()
