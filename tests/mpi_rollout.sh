#!/usr/bin/env bash
# A pool across MPI ranks: the rollout hash of N global envs is the same
# for 1, 2 and 3 ranks (and threads, and sync/async); bad input is
# reported by every rank.
set -u
SR=$1
. "$(dirname "$0")/mpi_env.sh"
fail() { echo "FAIL: $*"; exit 1; }

R="$SR rollout --env CartPole-v1 --envs 13 --seed 7 --steps 300 --hash"
h0=$($SR rollout --env CartPole-v1 --envs 13 --seed 7 --steps 300 --hash) || fail "no-MPI rollout"
[[ $h0 =~ ^[0-9a-f]{16}$ ]] || fail "hash format '$h0'"
for n in 1 2 3; do
	h=$($MPIRUN -np $n $R 2>/dev/null) || fail "mpirun -np $n rollout"
	[ "$h" = "$h0" ] || fail "$n ranks: '$h' vs 1 process '$h0'"
done
h=$($MPIRUN -np 3 $R --mode async --threads 1 2>/dev/null) || fail "3 ranks async"
[ "$h" = "$h0" ] || fail "3 ranks async: $h vs $h0"
h=$($MPIRUN -np 2 $R --seed 8 2>/dev/null) || fail "2 ranks seed 8"
[ "$h" != "$h0" ] || fail "the seed does not change the 2-rank hash"
hp=$($SR rollout --env Pendulum-v1 --envs 7 --seed 1 --steps 120 --autoreset same --hash)
h=$($MPIRUN -np 3 $SR rollout --env Pendulum-v1 --envs 7 --seed 1 --steps 120 --autoreset same --hash 2>/dev/null) ||
	fail "pendulum 3 ranks"
[ "$hp" = "$h" ] || fail "pendulum 3 ranks: $h vs $hp"

# Bad input: every rank says the same thing, the job fails. The launcher
# stops the job as soon as one rank exits, and on a loaded machine it can
# cut another rank's last line off, so a count is tried up to three times.
reported() { # reported N MESSAGE mpirun-args...
	local want=$1 msg=$2 out c try
	shift 2
	for try in 1 2 3; do
		out=$($MPIRUN "$@" 2>&1) && fail "accepted: $*"
		c=$(grep -cF "$msg" <<<"$out")
		[ "$c" = "$want" ] && return 0
	done
	fail "'$msg' reported by $c of $want ranks: $out"
}
reported 3 "num_envs 2 < 3 ranks" -np 3 $R --envs 2
reported 3 "options differ across ranks: rank 0 and rank 1 have seed 7 vs 9" -np 1 $R : -np 2 $R --seed 9
reported 2 "rank 0 and rank 1 have env 'CartPole-v1' vs 'Acrobot-v1'" -np 1 $R : -np 1 $R --env Acrobot-v1
echo "ok"
