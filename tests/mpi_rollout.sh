#!/usr/bin/env bash
# A pool across MPI ranks: the rollout hash of N global envs is the same
# for 1, 2 and 3 ranks (and threads, and sync/async); bad input is
# reported by every rank.
set -u
SR=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# shellcheck source=mpi_env.sh
. "$(dirname "$0")/mpi_env.sh"

R="$SR rollout --env CartPole-v1 --envs 13 --seed 7 --steps 300 --hash"
h0=$($SR rollout --env CartPole-v1 --envs 13 --seed 7 --steps 300 --hash) ||
	fail "no-MPI rollout: exit $?, expected 0"
expect_line -Ex "hash format" '[0-9a-f]{16}' <<<"$h0"
for n in 1 2 3; do
	h=$($MPIRUN -np $n $R 2>/dev/null) || fail "mpirun -np $n rollout: exit $?, expected 0"
	expect_eq "$n ranks as 1 process" "$h0" "$h"
done
h=$($MPIRUN -np 3 $R --mode async --threads 1 2>/dev/null) || fail "3 ranks async: exit $?, expected 0"
expect_eq "3 ranks async as 1 process" "$h0" "$h"
h=$($MPIRUN -np 2 $R --seed 8 2>/dev/null) || fail "2 ranks seed 8: exit $?, expected 0"
expect_ne "another seed, another 2-rank hash" "$h0" "$h"
hp=$($SR rollout --env Pendulum-v1 --envs 7 --seed 1 --steps 120 --autoreset same --hash)
h=$($MPIRUN -np 3 $SR rollout --env Pendulum-v1 --envs 7 --seed 1 --steps 120 --autoreset same --hash 2>/dev/null) ||
	fail "pendulum 3 ranks: exit $?, expected 0"
expect_eq "pendulum: 3 ranks as 1 process" "$hp" "$h"

# Bad input: every rank says the same thing, the job fails. The launcher
# stops the job as soon as one rank exits, and on a loaded machine it can
# cut another rank's last line off, so a count is tried up to three times.
reported() { # reported N MESSAGE mpirun-args...
	local want=$1 msg=$2 out c try
	shift 2
	for try in 1 2 3; do
		out=$($MPIRUN "$@" 2>&1) && fail "expected a refusal, accepted: $*"
		c=$(grep -cF "$msg" <<<"$out")
		[ "$c" = "$want" ] && return 0
	done
	fail "expected '$msg' from $want ranks, got it from $c: $out"
}
reported 3 "num_envs 2 < 3 ranks" -np 3 $R --envs 2
reported 3 "options differ across ranks: rank 0 and rank 1 have seed 7 vs 9" -np 1 $R : -np 2 $R --seed 9
reported 2 "rank 0 and rank 1 have env 'CartPole-v1' vs 'Acrobot-v1'" -np 1 $R : -np 1 $R --env Acrobot-v1
finish
