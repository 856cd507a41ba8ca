#!/usr/bin/env bash
# tests/mpi_pool.c under 1, 2 and 3 ranks; bench pool's per-rank JSON.
set -u
BIN=$1
SR=$2
. "$(dirname "$0")/mpi_env.sh"
fail() { echo "FAIL: $*"; exit 1; }
for np in 1 2 3; do
	out=$($MPIRUN -np $np "$BIN" 2>&1) || fail "mpi_pool -np $np: $out"
	grep -qx ok <<<"$out" || fail "mpi_pool -np $np: $out"
done
out=$($MPIRUN -np 3 "$SR" bench pool --envs-per-rank 32 --rounds 2 --seconds 0.05 --json 2>/dev/null) ||
	fail "bench pool -np 3"
for r in 0 1 2; do
	grep -q "\"row\":\"rank\",\"rank\":$r,\"ranks\":3,.*\"envs\":32,\"first_env\":$((32 * r))," <<<"$out" ||
		fail "bench pool: no row for rank $r: $out"
done
grep -Eq '"row":"total","ranks":3,.*"envs":96,.*"efficiency":[0-9.]+,.*"p99_us":[0-9.]+' <<<"$out" ||
	fail "bench pool: no total row: $out"
[ "$(wc -l <<<"$out")" = 4 ] || fail "bench pool: not 4 lines: $out"
out=$($MPIRUN -np 2 "$SR" bench ring 2>&1) && fail "bench ring under mpirun was accepted"
grep -q "not across MPI ranks" <<<"$out" || fail "bench ring under mpirun: $out"
echo ok
