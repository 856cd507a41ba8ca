#!/usr/bin/env bash
# stepring ring ls | inspect | rm | create: golden behaviour and exit codes.
# usage: cli_ring.sh STEPRING
set -u
SR=$1
N=sr-clitest-$$
fail() { echo "FAIL: $*" >&2; "$SR" ring rm --force "$N" "$N-junk" >/dev/null 2>&1; exit 1; }
expect_rc() { # expect_rc RC CMD... : run, check the exit code, keep the output in $out
	local want=$1
	shift
	out=$("$@" 2>&1)
	local rc=$?
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, wanted $want: $out"
}

expect_rc 0 "$SR" ring --help
grep -q "ring ls" <<<"$out" || fail "help lacks ls"
expect_rc 0 "$SR" ring create "$N" --capacity 256 --obs-dim 3 --fill 1000
expect_rc 0 "$SR" ring ls
grep -E "^$N +2 +256 +3 +4 .* 1000 +1000 .*dead" <<<"$out" >/dev/null || fail "ls: $out"
expect_rc 0 "$SR" ring ls --json
grep -q "\"name\":\"$N\",\"ring\":true,\"version\":2,.*\"capacity\":256,.*\"alive\":false" <<<"$out" ||
	fail "ls --json: $out"
expect_rc 0 "$SR" ring inspect "/$N"
grep -q "capacity 256 slots, obs_dim 3" <<<"$out" || fail "inspect geometry: $out"
grep -q "window        \[744, 1000): 256 published slots, 0 pad" <<<"$out" || fail "inspect window: $out"
expect_rc 0 "$SR" ring inspect "$N" --json
grep -q '"head":1000,"cursor":1000,"oldest":744' <<<"$out" || fail "inspect --json: $out"
# Errors: one line, exit 2.
expect_rc 2 "$SR" ring inspect
grep -q "NAME is missing" <<<"$out" || fail "$out"
expect_rc 2 "$SR" ring inspect "$N-nope"
[ "$(wc -l <<<"$out")" = 1 ] && grep -q "no segment named '/$N-nope'" <<<"$out" || fail "$out"
expect_rc 2 "$SR" ring ls --bogus
grep -q "unknown option '--bogus'" <<<"$out" || fail "$out"
expect_rc 2 "$SR" ring frob
expect_rc 2 "$SR" ring create "$N" --capacity 1000
grep -q "not a power of two" <<<"$out" || fail "$out"
expect_rc 2 "$SR" ring create "$N"
grep -q "already exists" <<<"$out" || fail "create twice: $out"
expect_rc 2 "$SR" ring create "$N-x" --capacity abc
# A segment that is not a ring is listed with --all and not removed without --force.
head -c 8192 /dev/zero >"/dev/shm/$N-junk" || fail "cannot write /dev/shm"
expect_rc 0 "$SR" ring ls --all
grep -E "^$N-junk .*not a ring" <<<"$out" >/dev/null || fail "ls --all: $out"
expect_rc 0 "$SR" ring ls
grep -q "$N-junk" <<<"$out" && fail "ls lists a non-ring"
expect_rc 2 "$SR" ring inspect "$N-junk"
grep -q "not a stepring ring" <<<"$out" || fail "$out"
expect_rc 2 "$SR" ring rm "$N-junk"
grep -q "not a stepring ring" <<<"$out" || fail "$out"
expect_rc 0 "$SR" ring rm --force "$N-junk"
# The creator exited without cleaning up: the ring is stale, rm removes it.
expect_rc 0 "$SR" ring rm "$N"
grep -q "removed /$N" <<<"$out" || fail "$out"
expect_rc 2 "$SR" ring inspect "$N"
expect_rc 0 "$SR" ring create "$N" --fill 10
expect_rc 0 "$SR" ring rm --stale "$N"
grep -q "removed /$N" <<<"$out" || fail "rm --stale: $out"
expect_rc 2 "$SR" ring rm "$N"
echo "cli_ring: ok"
