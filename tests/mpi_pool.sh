#!/usr/bin/env bash
# tests/mpi_pool.c under 1, 2 and 3 ranks; bench pool's per-rank JSON.
set -u
BIN=$1
SR=$2
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# shellcheck source=mpi_env.sh
. "$(dirname "$0")/mpi_env.sh"
for np in 1 2 3; do
	out=$($MPIRUN -np $np "$BIN" 2>&1) || fail "mpi_pool -np $np: exit $?, expected 0"
	expect_line -x "mpi_pool -np $np" ok <<<"$out"
done
out=$($MPIRUN -np 3 "$SR" bench pool --envs-per-rank 32 --rounds 2 --seconds 0.05 --json 2>/dev/null) ||
	fail "bench pool -np 3: exit $?, expected 0"
for r in 0 1 2; do
	expect_line "bench pool: the row of rank $r" \
		"\"row\":\"rank\",\"rank\":$r,\"ranks\":3,.*\"envs\":32,\"first_env\":$((32 * r))," <<<"$out"
done
expect_line -E "bench pool: the total row" \
	'"row":"total","ranks":3,.*"envs":96,.*"efficiency":[0-9.]+,.*"p99_us":[0-9.]+' <<<"$out"
expect_lines "bench pool: 3 rank rows and a total" 4 <<<"$out"
out=$($MPIRUN -np 2 "$SR" bench ring 2>&1) && fail "bench ring under mpirun: expected a refusal, it ran"
expect_line "bench ring under mpirun" "not across MPI ranks" <<<"$out"
finish
