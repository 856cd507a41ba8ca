#!/usr/bin/env bash
# stepring checkpoint: exit codes and messages (0 ok, 1 bad file, 2 usage).
set -u
SR=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() { # expect RC CMD... ; output in $T/out
	local want=$1; shift
	"$@" >"$T/out" 2>&1; local rc=$?
	[ "$rc" = "$want" ] || { cat "$T/out"; fail "'$*' exited $rc, expected $want"; }
}
expect 0 "$SR" checkpoint --help
grep -q "verify FILE" "$T/out" || fail "help text"
expect 2 "$SR" checkpoint
expect 2 "$SR" checkpoint verify
grep -q "FILE is missing" "$T/out" || fail "missing FILE message"
expect 2 "$SR" checkpoint frobnicate x
grep -q "unknown action 'frobnicate'" "$T/out" || fail "unknown action message"
expect 2 "$SR" checkpoint info --bogus x
grep -q "unknown option '--bogus'" "$T/out" || fail "unknown option message"
expect 2 "$SR" checkpoint verify a b
expect 2 "$SR" checkpoint verify "$T/none.ckpt"
grep -q "cannot open" "$T/out" || fail "missing file message"
expect 2 "$SR" checkpoint verify "$T"
grep -q "is a directory" "$T/out" || fail "directory message"
head -c 20000 /dev/urandom >"$T/junk.ckpt"
expect 1 "$SR" checkpoint info "$T/junk.ckpt"
grep -q "not a stepring checkpoint" "$T/out" || fail "junk file message"
: >"$T/empty.ckpt"
expect 1 "$SR" checkpoint verify "$T/empty.ckpt"
grep -q "truncated" "$T/out" || fail "empty file message"
# Stale temporaries of dead writers: mentioned by verify/info, removed by clean;
# a live process's temporary and other files are kept.
sh -c 'exit 0' & dead=$!; wait $dead
: >"$T/.junk.ckpt.tmp.$dead.0"
head -c 5000 /dev/zero >"$T/.junk.ckpt.tmp.$dead.7"
: >"$T/.junk.ckpt.tmp.$$.1"
: >"$T/.other.ckpt.tmp.$dead.0"
expect 1 "$SR" checkpoint verify "$T/junk.ckpt"
grep -q "2 stale temporary files (5000 bytes)" "$T/out" || fail "verify: stale note"
grep -q "checkpoint clean $T/junk.ckpt" "$T/out" || fail "verify: clean hint"
expect 0 "$SR" checkpoint clean --help
grep -q "clean FILE" "$T/out" || fail "clean in help"
expect 2 "$SR" checkpoint clean
expect 0 "$SR" checkpoint clean "$T/junk.ckpt"
grep -q "2 stale temporary files removed" "$T/out" || fail "clean: count"
grep -q "writer pid $dead is gone" "$T/out" || fail "clean: per-file line"
[ ! -e "$T/.junk.ckpt.tmp.$dead.0" ] && [ ! -e "$T/.junk.ckpt.tmp.$dead.7" ] || fail "clean: not removed"
[ -e "$T/.junk.ckpt.tmp.$$.1" ] || fail "clean removed a live writer's temporary"
[ -e "$T/.other.ckpt.tmp.$dead.0" ] || fail "clean removed another target's temporary"
expect 0 "$SR" checkpoint clean "$T/junk.ckpt"
grep -q "0 stale temporary files removed" "$T/out" || fail "clean: idempotent"
expect 1 "$SR" checkpoint verify "$T/junk.ckpt"
grep -q "stale" "$T/out" && fail "verify: note without stale files"
expect 1 "$SR" checkpoint clean "$T/nodir/x.ckpt"
grep -q "cannot read the directory" "$T/out" || fail "clean: missing directory"
expect 2 "$SR" bench checkpoint --backends nope
grep -q "unknown backend 'nope'" "$T/out" || fail "bench backend message"
expect 2 "$SR" bench checkpoint --replay-mib -1
echo ok
