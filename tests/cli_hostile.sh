#!/bin/bash
# Hostile and careless CLI use: every case ends promptly with the exit status
# and message it should (no hang, no "ok" or exit 0 after a failure).
#   cli_hostile.sh STEPRING REFDATA_DIR
set -u
S=$1
REF=$2
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# expect RC PATTERN CMD...: run with a 60 s guard, check status and output
# (stdout and stderr: $T/all).
expect() {
	local want=$1 pat=$2
	shift 2
	run timeout 60 "$@"
	[ "$rc" = 124 ] && { fail "hangs: $*"; return; }
	if [ "$rc" != "$want" ]; then
		fail "$*: exit $rc, expected $want"
		_show got "$T/all"
	fi
	[ -z "$pat" ] || expect_line -E "$*" "$pat" "$T/all"
}

# Limits: a synthetic topology of 4 billion PUs, a CSV of one endless line.
expect 2 "more than 16384 PUs" "$S" topo --synthetic "pack:65536 pu:65536"
expect 2 "more than 16384 PUs" "$S" topo --synthetic "pack:99999999999999999999 pu:2"
expect 0 "" "$S" topo --synthetic "pack:2 core:4 pu:2"
expect 2 "line longer than" "$S" envcheck --env CartPole-v1 --csv /dev/zero
# An impossible state in a reference row: refused, not stepped (Acrobot's
# angle wrap used to loop forever on theta = 1e300).
awk -F, 'BEGIN{OFS=","} NR==3{$3="1e300"} NR<=4' "$REF/Acrobot-v1.csv" >"$T/acro.csv"
expect 2 "can never be in" "$S" envcheck --env Acrobot-v1 --csv "$T/acro.csv"
awk -F, 'BEGIN{OFS=","} NR==3{$3="inf"} NR<=4' "$REF/Acrobot-v1.csv" >"$T/acro2.csv"
expect 2 "can never be in|bad state" "$S" envcheck --env Acrobot-v1 --csv "$T/acro2.csv"
awk -F, 'BEGIN{OFS=","} NR==3{$3="nan"} NR<=4' "$REF/CartPole-v1.csv" >"$T/cp.csv"
expect 2 "can never be in|bad state" "$S" envcheck --env CartPole-v1 --csv "$T/cp.csv"

# Success is never reported on failure.
if [ -w /dev/full ]; then
	expect 1 "writing '/dev/full' failed" "$S" sweep --env CartPole-v1 --envs 2 --threads 1 \
		--mode sync --seconds 0.02 --warmup 0 --cooldown 0 --out /dev/full
	expect_no_line "sweep does not say it wrote to /dev/full" "wrote" "$T/all"
fi
# Every configuration skipped (async needs batch < num_envs): nothing ran.
expect 1 "no configuration ran" "$S" sweep --env CartPole-v1 --envs 2 --threads 1 \
	--mode async --batch 4 --seconds 0.02 --warmup 0 --cooldown 0
expect 1 "parts? failed" "$S" bench checkpoint --envs 16 --threads 1 --replay-mib 1 \
	--seconds 0.1 --dir /proc --json
expect_no_line "no goal met without a checkpoint" '"p99_goal_met":true' "$T/all"

finish
