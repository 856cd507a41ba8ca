#!/usr/bin/env bash
# A run saved on N ranks restores on M ranks bit-exactly (N -> M re-shard),
# the manifest is checked, and a failed part leaves the old checkpoint.
set -u
BIN=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# shellcheck source=mpi_env.sh
. "$(dirname "$0")/mpi_env.sh"
D=$T

ref=$($MPIRUN -np 1 "$BIN" save "$D/one" 2>"$D/err") || fail "save 1 rank: $ref $(cat "$D/err")"
expect_line -Ex "hash format" '[0-9a-f]{16}' <<<"$ref"
for n in 2 3; do
	h=$($MPIRUN -np $n "$BIN" save "$D/s$n" 2>/dev/null) || fail "save $n ranks: exit $?, expected 0"
	expect_eq "save on $n ranks continues as on 1" "$ref" "$h"
	expect_line "manifest of $n parts" "^parts $n$" "$D/s$n/manifest"
done
for from in one s2 s3; do
	for m in 1 2 3; do
		h=$($MPIRUN -np $m "$BIN" load "$D/$from" 2>"$D/err") ||
			fail "restore $from on $m ranks: $h $(cat "$D/err")"
		expect_eq "restore $from on $m ranks" "$ref" "$h"
	done
done
# A second checkpoint: a new generation, the old parts gone.
h=$($MPIRUN -np 2 "$BIN" save "$D/s2" 2>/dev/null) || fail "save again: exit $?, expected 0"
expect_line "generation 2" "^generation 2$" "$D/s2/manifest"
parts=("$D/s2"/part-1-*)
[ ! -e "${parts[0]}" ] || fail "the old parts: expected none left, got: ${parts[*]}"
parts=("$D/s2"/part-2-*)
expect_eq "the new parts: count of ${parts[*]}" 2 "${#parts[@]}"
# A part cut short: every rank reports it, nothing restored.
f=$(ls "$D/s3"/part-1-1.ckpt)
truncate -s 8192 "$f"
out=$($MPIRUN -np 2 "$BIN" load "$D/s3" 2>&1) && fail "a damaged part: expected a failure, it was restored"
grep "sr_mpi_pool_restore: rank" <<<"$out" | expect_lines "a damaged part reported by both ranks" 2
out=$($MPIRUN -np 2 "$BIN" load "$D/none" 2>&1) && fail "restore without a manifest: expected a failure, it succeeded"
expect_line "restore without a manifest" "no manifest in" <<<"$out"
# An opaque env (Box2D's LunarLander, ABI v2): saved on 1 and 3 ranks,
# restored on 2 and 1 (skipped in a build without Box2D).
if "$(dirname "$BIN")/../stepring" envs 2>/dev/null | grep -q '^LunarLander-v3 '; then
	ref=$($MPIRUN -np 1 "$BIN" save "$D/ll1" LunarLander-v3 2>"$D/err") ||
		fail "LunarLander save 1 rank: $ref $(cat "$D/err")"
	h=$($MPIRUN -np 3 "$BIN" save "$D/ll3" LunarLander-v3 2>/dev/null) ||
		fail "LunarLander save 3: exit $?, expected 0"
	expect_eq "LunarLander on 3 ranks continues as on 1" "$ref" "$h"
	for run in "ll1 2" "ll3 1" "ll3 2"; do
		set -- $run
		h=$($MPIRUN -np $2 "$BIN" load "$D/$1" LunarLander-v3 2>"$D/err") ||
			fail "LunarLander restore $1 on $2 ranks: $h $(cat "$D/err")"
		expect_eq "LunarLander restore $1 on $2 ranks" "$ref" "$h"
	done
	echo "LunarLander-v3 (opaque state): saved on 1 and 3 ranks, restored on 1 and 2: ok"
else
	echo "LunarLander-v3 not built: opaque re-shard not tested"
fi
finish
