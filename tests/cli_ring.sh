#!/usr/bin/env bash
# stepring ring ls | inspect | rm | create: golden behaviour and exit codes.
# usage: cli_ring.sh STEPRING
set -u
SR=$1
N=sr-clitest-$$
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# shellcheck disable=SC2317 # called by the exit trap
cleanup() { "$SR" ring rm --force "$N" "$N-junk" >/dev/null 2>&1; }

expect_exit 0 "$SR" ring --help
expect_line "help lists ls" "ring ls" "$T/all"
expect_exit 0 "$SR" ring create "$N" --capacity 256 --obs-dim 3 --fill 1000
expect_exit 0 "$SR" ring ls
expect_line -E "ls" "^$N +2 +256 +3 +4 .* 1000 +1000 .*dead" "$T/all"
expect_exit 0 "$SR" ring ls --json
expect_line "ls --json" \
	"\"name\":\"$N\",\"ring\":true,\"version\":2,.*\"capacity\":256,.*\"alive\":false" "$T/all"
expect_exit 0 "$SR" ring inspect "/$N"
expect_line "inspect geometry" "capacity 256 slots, obs_dim 3" "$T/all"
expect_line "inspect window" "window        \[744, 1000): 256 published slots, 0 pad" "$T/all"
expect_exit 0 "$SR" ring inspect "$N" --json
expect_line "inspect --json" '"head":1000,"cursor":1000,"oldest":744' "$T/all"
# Errors: one line, exit 2.
expect_exit 2 "$SR" ring inspect
expect_line "inspect without NAME" "NAME is missing" "$T/all"
expect_exit 2 "$SR" ring inspect "$N-nope"
expect_lines "inspect a missing ring: one line" 1 "$T/all"
expect_line "inspect a missing ring" "no segment named '/$N-nope'" "$T/all"
expect_exit 2 "$SR" ring ls --bogus
expect_line "ls --bogus" "unknown option '--bogus'" "$T/all"
expect_exit 2 "$SR" ring frob
expect_exit 2 "$SR" ring create "$N" --capacity 1000
expect_line "create --capacity 1000" "not a power of two" "$T/all"
expect_exit 2 "$SR" ring create "$N"
expect_line "create twice" "already exists" "$T/all"
expect_exit 2 "$SR" ring create "$N-x" --capacity abc
# A segment that is not a ring is listed with --all and not removed without --force.
head -c 8192 /dev/zero >"/dev/shm/$N-junk" || die "cannot write /dev/shm"
expect_exit 0 "$SR" ring ls --all
expect_line -E "ls --all" "^$N-junk .*not a ring" "$T/all"
expect_exit 0 "$SR" ring ls
expect_no_line "ls leaves out a non-ring" "$N-junk" "$T/all"
expect_exit 2 "$SR" ring inspect "$N-junk"
expect_line "inspect a non-ring" "not a stepring ring" "$T/all"
expect_exit 2 "$SR" ring rm "$N-junk"
expect_line "rm a non-ring without --force" "not a stepring ring" "$T/all"
expect_exit 0 "$SR" ring rm --force "$N-junk"
# The creator exited without cleaning up: the ring is stale, rm removes it.
expect_exit 0 "$SR" ring rm "$N"
expect_line "rm a stale ring" "removed /$N" "$T/all"
expect_exit 2 "$SR" ring inspect "$N"
expect_exit 0 "$SR" ring create "$N" --fill 10
expect_exit 0 "$SR" ring rm --stale "$N"
expect_line "rm --stale" "removed /$N" "$T/all"
expect_exit 2 "$SR" ring rm "$N"
finish
