#!/usr/bin/env bash
# A rank that dies, or hangs, ends the job with an error on the others
# within a bounded time (tests/mpi_faults.c).
set -u
BIN=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# shellcheck source=mpi_env.sh
. "$(dirname "$0")/mpi_env.sh"

for np in 2 3; do
	t0=$(date +%s)
	out=$($MPIRUN -np $np "$BIN" hang 2>&1) && fail "hang -np $np: expected the job to fail, it succeeded"
	dt=$(($(date +%s) - t0))
	echo "hang -np $np: ${dt}s"
	expect_num "hang -np $np: seconds to the end" "$dt" "<" 45
	expect_line "hang -np $np: the timeout message from rank 0" \
		"rank 0: step 100: sr_mpi_pool_barrier: rank 0 waited 3 s for the other ranks: a rank died or hangs" \
		<<<"$out"

	t0=$(date +%s)
	out=$($MPIRUN -np $np "$BIN" kill 2>&1) && fail "kill -np $np: expected the job to fail, it succeeded"
	dt=$(($(date +%s) - t0))
	echo "kill -np $np: ${dt}s"
	expect_num "kill -np $np: seconds to the end" "$dt" "<" 45
	# rank 0 either timed out in the heartbeat or was stopped by the
	# launcher, which noticed the death; either way it said so
	expect_line -E "kill -np $np: an error from rank 0" \
		"rank 0: (step 100: sr_mpi_pool_barrier: rank 0 waited 3 s|stopped by the launcher)" <<<"$out"
done
finish
