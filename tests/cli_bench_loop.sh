#!/usr/bin/env bash
# CLI tests of `stepring bench loop`: help, one-line errors with exit 2, and
# a short closed loop on the host device whose JSON carries both figures.
# usage: cli_bench_loop.sh STEPRING
set -u
SR=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

expect_rc 0 "help" "$SR" bench loop --help
expect_line "help mentions --policy" '--policy' "$T/out"
"$SR" bench --help 2>&1 | expect_line "bench --help lists loop" '^ *loop'

for args in "--bogus" "--policy mlp:0x2" "--policy cnn:8x1" "--policy mlp:8x2:sigmoid" \
	"--device tpu" "--envs 0" "--mode sideways" "--seconds abc" "--env NoSuchEnv-v9" \
	"--envs 4 --batch 4" "--h2d --device host"; do
	# shellcheck disable=SC2086
	expect_rc 2 "bad: $args" "$SR" bench loop $args && expect_one_error "$args"
done

if ! "$SR" version | grep -q cuda; then
	expect_rc 2 "cuda asked for in a build without it" "$SR" bench loop --device cuda &&
		expect_one_error "--device cuda"
fi

expect_rc 0 "short host loop" "$SR" bench loop --device host --env CartPole-v1 --envs 16 \
	--threads 1 --policy mlp:8x1 --seconds 0.05 --warmup 0 --json
for key in env_only_steps_per_sec loop_steps_per_sec ratio us_policy policy_macs; do
	expect_line "JSON has $key" "\"$key\":" "$T/out"
done
expect_line "JSON says device host" '"device":"host"' "$T/out"
expect_line "mlp:8x1 on CartPole: 4*8 + 8*2 = 48 MACs" '"policy_macs":48,' "$T/out"
expect_rc 0 "short sync box loop" "$SR" bench loop --device host --env Pendulum-v1 --envs 8 \
	--threads 1 --mode sync --policy mlp:4x2:relu --seconds 0.05 --warmup 0

finish
