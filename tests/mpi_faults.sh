#!/usr/bin/env bash
# A rank that dies, or hangs, ends the job with an error on the others
# within a bounded time (tests/mpi_faults.c).
set -u
BIN=$1
. "$(dirname "$0")/mpi_env.sh"
fail() { echo "FAIL: $*"; exit 1; }

for np in 2 3; do
	t0=$(date +%s)
	out=$($MPIRUN -np $np "$BIN" hang 2>&1) && fail "hang -np $np: the job succeeded"
	dt=$(($(date +%s) - t0))
	echo "hang -np $np: ${dt}s"
	[ "$dt" -lt 45 ] || fail "hang -np $np took ${dt}s"
	grep -q "rank 0: step 100: sr_mpi_pool_barrier: rank 0 waited 3 s for the other ranks: a rank died or hangs" <<<"$out" ||
		fail "hang -np $np: no timeout message from rank 0: $out"

	t0=$(date +%s)
	out=$($MPIRUN -np $np "$BIN" kill 2>&1) && fail "kill -np $np: the job succeeded"
	dt=$(($(date +%s) - t0))
	echo "kill -np $np: ${dt}s"
	[ "$dt" -lt 45 ] || fail "kill -np $np took ${dt}s"
	# rank 0 either timed out in the heartbeat or was stopped by the
	# launcher, which noticed the death; either way it said so
	grep -Eq "rank 0: (step 100: sr_mpi_pool_barrier: rank 0 waited 3 s|stopped by the launcher)" <<<"$out" ||
		fail "kill -np $np: no error from rank 0: $out"
done
echo ok
