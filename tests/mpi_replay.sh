#!/usr/bin/env bash
# Replay across ranks: sampled transitions follow CartPole's dynamics and
# come from the ranks that host their envs, for 1, 2 and 3 ranks, through
# the MPI path (force), with the node's rings mapped through shared memory
# (direct), and with only the own ring mapped (noshm); then prioritized
# sampling and the limiter across ranks.
set -u
BIN=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# shellcheck source=mpi_env.sh
. "$(dirname "$0")/mpi_env.sh"
for np in 1 2 3; do
	for how in force direct noshm; do
		out=$($MPIRUN -np $np "$BIN" check $how 2>&1) || fail "-np $np $how: exit $?, expected 0"
		expect_line -x "-np $np $how" ok <<<"$out"
		echo "-np $np $how: $(head -1 <<<"$out")"
	done
done
# Prioritized over every rank's slots (rank 0's sum-tree; the frequencies
# follow the priorities, the weights are right, the rows valid), through
# the mapped rings and through MPI; the limiter and counters across ranks.
for np in 1 2 3; do
	for run in "prio direct" "prio force" "limit direct"; do
		[ "$np" = 1 ] && [ "$run" = "prio force" ] && continue
		out=$($MPIRUN -np $np "$BIN" $run 2>&1) || fail "-np $np $run: exit $?, expected 0"
		expect_line -x "-np $np $run" ok <<<"$out"
		echo "-np $np $run: $(grep -E '^(prioritized|limiter)' <<<"$out")"
	done
done
# A rank that hangs: the sampler reading its ring gives up after the
# timeout (3 s here) instead of waiting forever; the job then ends.
t0=$(date +%s)
out=$(STEPRING_MPI_TIMEOUT=3 $MPIRUN -x STEPRING_MPI_TIMEOUT -np 2 "$BIN" hang 2>&1)
t=$(($(date +%s) - t0))
expect_line -x "hang" ok <<<"$out"
expect_num "hang: seconds to the end" "$t" "<" 60
echo "hang: $(grep '^sample from' <<<"$out") (job over in $t s)"
finish
