#!/usr/bin/env bash
# stepring compare on real runs, interleaved (base, new, base, new, ...):
#   1. one build against itself: the verdict must be "no change";
#   2. a deliberate slowdown, the same command with spin:cost_us=2 instead
#      of 1 (--ignore env matches the two): the verdict must be "worse".
# A wrong verdict fails the test at once (the rule would have merged or
# reverted what is not there). "too noisy" is what a busy machine gives:
# then the test does what the tool says, more repeats appended to both
# files, up to 4 x 2 pairs; a case still too noisy after that is skipped
# (exit 77 at the end), never passed.
# usage: tool_compare_real.sh STEPRING
set -u
SR=$1
tmp=$(mktemp -d /tmp/srtest-real-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
run() { # run COST FILE: one sweep, appended
	"$SR" sweep --env "spin:cost_us=$1" --envs 16 --threads 1 --bind none --seconds 2 \
		--out "$2" --append --no-progress >/dev/null || fail "sweep cost_us=$1"
}
skipped=0
# check NAME BASE_COST NEW_COST WANT_RC [COMPARE-ARGS...]
check() {
	local name=$1 cb=$2 cn=$3 want=$4 attempt out rc
	shift 4
	for attempt in 1 2 3 4; do
		for i in 1 2; do
			run "$cb" "$tmp/$name.base"
			run "$cn" "$tmp/$name.new"
		done
		out=$("$SR" compare "$tmp/$name.base" "$tmp/$name.new" "$@" 2>&1)
		rc=$?
		if [ "$rc" = "$want" ]; then
			echo "$name: after $attempt x 2 interleaved pairs:"
			echo "$out" | sed -n '/^sweep/,/^verdict:/p'
			return 0
		fi
		[ "$rc" = 5 ] || fail "$name: exit $rc, wanted $want: $out"
		echo "$name: too noisy after $attempt x 2 pairs (load $(cut -d' ' -f1-3 /proc/loadavg))"
	done
	echo "$name: SKIP: still too noisy after 8 interleaved pairs: $out"
	skipped=1
}
check same 1 1 3
check slowdown 1 2 4 --ignore env
[ "$skipped" = 0 ] || exit 77
echo "ok"
