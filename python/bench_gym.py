#!/usr/bin/env python3
"""stepring against Gymnasium's SyncVectorEnv, both through Gymnasium's API.

    STEPRING_LIB=build/libstepring.so PYTHONPATH=../shared/thirdparty/python \\
        /usr/bin/python3 python/bench_gym.py [--envs 4,64,1024] [--env CartPole-v1]

For each num_envs, in one process, interleaved round by round so both see
the same machine load:

  stepring  gymnasium.make_vec("stepring/<env>", num_envs=n): every option at
            its default (copy=True, threads chosen from the work, next-step
            autoreset), what a Gymnasium user gets;
  sync      gymnasium.make_vec("<env>", num_envs=n, vectorization_mode="sync"):
            gymnasium.vector.SyncVectorEnv of Gymnasium's own env.

Both step with the same pre-drawn random actions (int64 arrays, as
action_space.sample() gives). Each round runs each side for --seconds; the
figure is the median over --rounds rounds of env steps per second
(num_envs x steps / wall time). speedup = stepring / sync; the goal is
speedup >= 1 at every size.

Then the cost of the default copy (copy=True against copy=False, same
interleaving) at --copy-envs envs: ns per step() and the share of a step.
"""
import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gymnasium as gym  # noqa: E402
import stepring  # noqa: E402


def rate(env, acts, seconds):
    """env steps per second of env.step over the pre-drawn actions."""
    n = env.num_envs
    k = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        env.step(acts[k % len(acts)])
        k += 1
        if k % 4 == 0:
            t = time.perf_counter()
            if t >= deadline:
                return n * k / (t - t0), (t - t0) / k


def pair(make_a, make_b, n, seconds, rounds, seed=0):
    a, b = make_a(n), make_b(n)
    space = a.action_space
    space.seed(seed)
    acts = [space.sample() for _ in range(64)]
    a.reset(seed=seed)
    b.reset(seed=seed)
    rate(a, acts, min(0.1, seconds))  # warm-up
    rate(b, acts, min(0.1, seconds))
    ra, rb, ta, tb = [], [], [], []
    for _ in range(rounds):
        x, tx = rate(a, acts, seconds)
        y, ty = rate(b, acts, seconds)
        ra.append(x)
        rb.append(y)
        ta.append(tx)
        tb.append(ty)
    info = getattr(a.unwrapped, "threads_note", "")
    a.close()
    b.close()
    return (statistics.median(ra), statistics.median(rb), statistics.median(ta),
            statistics.median(tb), info, [x / y for x, y in zip(ra, rb)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--envs", default="4,64,1024")
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--copy-envs", type=int, default=1024)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    print("stepring %s, gymnasium %s, %s, %d rounds of %.2f s a side, interleaved; "
          "medians" % (stepring.version(), gym.__version__, args.env, args.rounds,
                       args.seconds))
    print("%6s %14s %14s %8s  %s" % ("envs", "stepring/s", "sync/s", "speedup",
                                     "stepring threads"))
    ok = True
    for n in [int(x) for x in args.envs.split(",")]:
        sr, sy, _, _, note, ratios = pair(
            lambda k: gym.make_vec("stepring/" + args.env, num_envs=k),
            lambda k: gym.make_vec(args.env, num_envs=k, vectorization_mode="sync"),
            n, args.seconds, args.rounds)
        ok &= sr >= sy
        print("%6d %14.0f %14.0f %8.1f  %s  (rounds: %s)" % (
            n, sr, sy, sr / sy, note, ", ".join("%.1f" % r for r in ratios)))
    if args.copy_envs:
        n = args.copy_envs
        cp, nc, tcp, tnc, _, ratios = pair(
            lambda k: stepring.make_vec(args.env, k),
            lambda k: stepring.make_vec(args.env, k, copy=False),
            n, args.seconds, args.rounds)
        print("copy cost at %d envs: copy=True %.0f steps/s (%.2f us a step()), copy=False "
              "%.0f steps/s (%.2f us a step()): difference %.2f us a step() (rounds' "
              "ratios %s)" % (n, cp, tcp * 1e6, nc, tnc * 1e6, (tcp - tnc) * 1e6,
                              ", ".join("%.3f" % r for r in ratios)))
        # The copies alone, timed directly (the difference above is within
        # the noise of a busy machine): what copy=True adds to each step().
        with stepring.make_vec(args.env, n, copy=False) as e:
            e.reset()
            obs, rew, te, tr, _ = e.step(np.zeros(n, np.int32))
            reps = 2000
            best = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(reps):
                    obs.copy(), rew.astype(np.float64), te.copy(), tr.copy()
                best.append((time.perf_counter() - t0) / reps)
            c = statistics.median(best)
            print("copy alone at %d envs (obs %d B, float64 rewards, flags): %.2f us a step(), "
                  "%.1f%% of a copy=True step()" % (n, obs.nbytes, c * 1e6, 100 * c / tcp))
    print("goal (stepring >= SyncVectorEnv at every size): %s" % ("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
