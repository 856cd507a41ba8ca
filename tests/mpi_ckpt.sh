#!/usr/bin/env bash
# A run saved on N ranks restores on M ranks bit-exactly (N -> M re-shard),
# the manifest is checked, and a failed part leaves the old checkpoint.
set -u
BIN=$1
. "$(dirname "$0")/mpi_env.sh"
fail() { echo "FAIL: $*"; exit 1; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT

ref=$($MPIRUN -np 1 "$BIN" save "$D/one" 2>"$D/err") || fail "save 1 rank: $ref $(cat "$D/err")"
[[ $ref =~ ^[0-9a-f]{16}$ ]] || fail "hash '$ref'"
for n in 2 3; do
	h=$($MPIRUN -np $n "$BIN" save "$D/s$n" 2>/dev/null) || fail "save $n ranks"
	[ "$h" = "$ref" ] || fail "save on $n ranks continues differently: $h vs $ref"
	grep -q "^parts $n$" "$D/s$n/manifest" || fail "manifest of $n parts: $(cat "$D/s$n/manifest")"
done
for from in one s2 s3; do
	for m in 1 2 3; do
		h=$($MPIRUN -np $m "$BIN" load "$D/$from" 2>"$D/err") ||
			fail "restore $from on $m ranks: $h $(cat "$D/err")"
		[ "$h" = "$ref" ] || fail "restore $from on $m ranks: $h vs $ref"
	done
done
# A second checkpoint: a new generation, the old parts gone.
h=$($MPIRUN -np 2 "$BIN" save "$D/s2" 2>/dev/null) || fail "save again"
grep -q "^generation 2$" "$D/s2/manifest" || fail "generation 2: $(cat "$D/s2/manifest")"
[ "$(ls "$D/s2" | grep -c '^part-1-')" = 0 ] || fail "old parts left: $(ls "$D/s2")"
[ "$(ls "$D/s2" | grep -c '^part-2-')" = 2 ] || fail "new parts: $(ls "$D/s2")"
# A part cut short: every rank reports it, nothing restored.
f=$(ls "$D/s3"/part-1-1.ckpt)
truncate -s 8192 "$f"
out=$($MPIRUN -np 2 "$BIN" load "$D/s3" 2>&1) && fail "a damaged part was restored"
[ "$(grep -c "sr_mpi_pool_restore: rank" <<<"$out")" = 2 ] || fail "damaged part not reported by both ranks: $out"
out=$($MPIRUN -np 2 "$BIN" load "$D/none" 2>&1) && fail "restore without a manifest"
grep -q "no manifest in" <<<"$out" || fail "no manifest: $out"
# An opaque env (Box2D's LunarLander, ABI v2): saved on 1 and 3 ranks,
# restored on 2 and 1 (skipped in a build without Box2D).
if "$(dirname "$BIN")/../stepring" envs 2>/dev/null | grep -q '^LunarLander-v3 '; then
	ref=$($MPIRUN -np 1 "$BIN" save "$D/ll1" LunarLander-v3 2>"$D/err") ||
		fail "LunarLander save 1 rank: $ref $(cat "$D/err")"
	h=$($MPIRUN -np 3 "$BIN" save "$D/ll3" LunarLander-v3 2>/dev/null) || fail "LunarLander save 3"
	[ "$h" = "$ref" ] || fail "LunarLander on 3 ranks continues differently: $h vs $ref"
	for run in "ll1 2" "ll3 1" "ll3 2"; do
		set -- $run
		h=$($MPIRUN -np $2 "$BIN" load "$D/$1" LunarLander-v3 2>"$D/err") ||
			fail "LunarLander restore $1 on $2 ranks: $h $(cat "$D/err")"
		[ "$h" = "$ref" ] || fail "LunarLander restore $1 on $2 ranks: $h vs $ref"
	done
	echo "LunarLander-v3 (opaque state): saved on 1 and 3 ranks, restored on 1 and 2: ok"
else
	echo "LunarLander-v3 not built: opaque re-shard not tested"
fi
echo ok
