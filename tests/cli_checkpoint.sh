#!/usr/bin/env bash
# stepring checkpoint: exit codes and messages (0 ok, 1 bad file, 2 usage).
set -u
SR=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
expect_exit 0 "$SR" checkpoint --help
expect_line "help text" "verify FILE" "$T/all"
expect_exit 2 "$SR" checkpoint
expect_exit 2 "$SR" checkpoint verify
expect_line "missing FILE message" "FILE is missing" "$T/all"
expect_exit 2 "$SR" checkpoint frobnicate x
expect_line "unknown action message" "unknown action 'frobnicate'" "$T/all"
expect_exit 2 "$SR" checkpoint info --bogus x
expect_line "unknown option message" "unknown option '--bogus'" "$T/all"
expect_exit 2 "$SR" checkpoint verify a b
expect_exit 2 "$SR" checkpoint verify "$T/none.ckpt"
expect_line "missing file message" "cannot open" "$T/all"
expect_exit 2 "$SR" checkpoint verify "$T"
expect_line "directory message" "is a directory" "$T/all"
head -c 20000 /dev/urandom >"$T/junk.ckpt"
expect_exit 1 "$SR" checkpoint info "$T/junk.ckpt"
expect_line "junk file message" "not a stepring checkpoint" "$T/all"
: >"$T/empty.ckpt"
expect_exit 1 "$SR" checkpoint verify "$T/empty.ckpt"
expect_line "empty file message" "truncated" "$T/all"
# Stale temporaries of dead writers: mentioned by verify/info, removed by clean;
# a live process's temporary and other files are kept.
sh -c 'exit 0' & dead=$!; wait $dead
: >"$T/.junk.ckpt.tmp.$dead.0"
head -c 5000 /dev/zero >"$T/.junk.ckpt.tmp.$dead.7"
: >"$T/.junk.ckpt.tmp.$$.1"
: >"$T/.other.ckpt.tmp.$dead.0"
expect_exit 1 "$SR" checkpoint verify "$T/junk.ckpt"
expect_line "verify: stale note" "2 stale temporary files (5000 bytes)" "$T/all"
expect_line "verify: clean hint" "checkpoint clean $T/junk.ckpt" "$T/all"
expect_exit 0 "$SR" checkpoint clean --help
expect_line "clean in help" "clean FILE" "$T/all"
expect_exit 2 "$SR" checkpoint clean
expect_exit 0 "$SR" checkpoint clean "$T/junk.ckpt"
expect_line "clean: count" "2 stale temporary files removed" "$T/all"
expect_line "clean: per-file line" "writer pid $dead is gone" "$T/all"
for f in ".junk.ckpt.tmp.$dead.0" ".junk.ckpt.tmp.$dead.7"; do
	[ ! -e "$T/$f" ] || fail "clean: expected $f removed, it is still there"
done
[ -e "$T/.junk.ckpt.tmp.$$.1" ] || fail "clean: expected a live writer's temporary kept, it is gone"
[ -e "$T/.other.ckpt.tmp.$dead.0" ] || fail "clean: expected another target's temporary kept, it is gone"
expect_exit 0 "$SR" checkpoint clean "$T/junk.ckpt"
expect_line "clean: idempotent" "0 stale temporary files removed" "$T/all"
expect_exit 1 "$SR" checkpoint verify "$T/junk.ckpt"
expect_no_line "verify: note without stale files" "stale" "$T/all"
expect_exit 1 "$SR" checkpoint clean "$T/nodir/x.ckpt"
expect_line "clean: missing directory" "cannot read the directory" "$T/all"
expect_exit 2 "$SR" bench checkpoint --backends nope
expect_line "bench backend message" "unknown backend 'nope'" "$T/all"
expect_exit 2 "$SR" bench checkpoint --replay-mib -1
finish
