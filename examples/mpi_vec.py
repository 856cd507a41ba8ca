"""A Gymnasium vector env spread over MPI ranks.

    mpirun -np 3 python3 examples/mpi_vec.py --envs 48 --steps 500
    srun -n 16 python3 examples/mpi_vec.py --envs 4096

Every rank calls stepring.make_vec(..., comm=MPI.COMM_WORLD) with the same
options and steps its own block of the 48 envs (rank r: envs
[first_env, first_env + num_envs)), seeded from (seed, global env index):
the run is the same for any number of ranks. Rank 0 prints the ranks'
shares and the episode statistics summed over the ranks.

--check also steps one local env of all the envs on rank 0 and checks that
the ranks' observations, gathered in global env order, equal its own.
"""
import argparse
import sys

import numpy as np
from mpi4py import MPI

import stepring


def actions(t, first, n):
    # a fixed action per (step, global env): the same wherever the env lives
    e = np.arange(first, first + n)
    return ((t * 5 + e * 3) % 7 < 3).astype(np.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--envs", type=int, default=48)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

    env = stepring.make_vec(a.env, a.envs, seed=a.seed, num_threads=a.threads, comm=comm)
    ref = stepring.make_vec(a.env, a.envs, seed=a.seed, num_threads=1) \
        if a.check and rank == 0 else None
    obs, _ = env.reset()
    robs = ref.reset()[0] if ref is not None else None
    returns, ep = np.zeros(env.num_envs), []
    bad = 0
    for t in range(a.steps + 1):
        glob = comm.gather(obs.copy(), root=0)
        if ref is not None and not np.array_equal(np.concatenate(glob), robs):
            bad += 1
        if t == a.steps:
            break
        obs, rew, term, trunc, _ = env.step(actions(t, env.first_env, env.num_envs))
        if ref is not None:
            robs = ref.step(actions(t, 0, a.envs))[0]
        returns += rew
        for i in np.flatnonzero(term | trunc):
            ep.append(returns[i])
            returns[i] = 0
    shares = comm.gather((env.first_env, env.num_envs, env.mpi_info["cpus"]), root=0)
    eps = comm.reduce(len(ep), op=MPI.SUM, root=0)
    tot = comm.reduce(float(sum(ep)), op=MPI.SUM, root=0)
    bad = comm.bcast(bad, root=0)
    if rank == 0:
        for r, (f, n, cpus) in enumerate(shares):
            print("rank %d: envs [%d, %d) on cpus %s" % (r, f, f + n, cpus))
        print("%d episodes, mean return %.2f" % (eps, tot / max(eps, 1)))
        if a.check:
            print("check:", "ok" if bad == 0 else "FAIL (%d steps differ)" % bad)
    env.close()
    if ref is not None:
        ref.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
