#!/usr/bin/env bash
# stepring compare on two real runs of one build, interleaved (base, new,
# base, new, ...): the verdict must be "no change". "better" or "worse"
# fails the test (the rule would have merged or reverted a change that is
# not there). "too noisy" is what a busy machine gives: then the test does
# what the tool says, more repeats (appended to both files), up to three
# rounds of them; if the machine is still too noisy it is skipped (77),
# never passed.
# usage: tool_compare_same.sh STEPRING
set -u
SR=$1
tmp=$(mktemp -d /tmp/srtest-same-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
run() { # run FILE: one sweep, appended
	"$SR" sweep --env spin:cost_us=5 --envs 16 --threads 1 --seconds 1 --out "$1" --append \
		--no-progress >/dev/null || fail "sweep"
}
for attempt in 1 2 3; do
	for i in 1 2 3; do
		run "$tmp/base.jsonl"
		run "$tmp/new.jsonl"
	done
	out=$("$SR" compare "$tmp/base.jsonl" "$tmp/new.jsonl" 2>&1)
	rc=$?
	echo "$out" | sed -n '/^sweep/,/verdict:/p'
	case $rc in
	3)
		grep -q "^verdict: no change (exit 3)$" <<<"$out" || fail "$out"
		echo "ok (after $attempt x 3 interleaved pairs)"
		exit 0
		;;
	5) echo "too noisy after $attempt x 3 pairs (load: $(cut -d' ' -f1-3 /proc/loadavg)); more repeats" ;;
	*) fail "one build against itself: exit $rc: $out" ;;
	esac
done
echo "SKIP: still too noisy after 9 interleaved pairs (load: $(cut -d' ' -f1-3 /proc/loadavg))"
exit 77
