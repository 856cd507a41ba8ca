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
expect 1 "$SR" checkpoint verify "$T/none.ckpt"
grep -q "cannot open" "$T/out" || fail "missing file message"
head -c 20000 /dev/urandom >"$T/junk.ckpt"
expect 1 "$SR" checkpoint info "$T/junk.ckpt"
grep -q "not a stepring checkpoint" "$T/out" || fail "junk file message"
: >"$T/empty.ckpt"
expect 1 "$SR" checkpoint verify "$T/empty.ckpt"
grep -q "truncated" "$T/out" || fail "empty file message"
expect 2 "$SR" bench checkpoint --backends nope
grep -q "unknown backend 'nope'" "$T/out" || fail "bench backend message"
expect 2 "$SR" bench checkpoint --replay-mib -1
echo ok
