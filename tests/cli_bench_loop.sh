#!/usr/bin/env bash
# CLI tests of `stepring bench loop`: help, one-line errors with exit 2, and
# a short closed loop on the host device whose JSON carries both figures.
# usage: cli_bench_loop.sh STEPRING
set -u
SR=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# expect RC DESCRIPTION CMD...: stdout/stderr kept in $TMP/out, $TMP/err
expect() {
	local want=$1 what=$2
	shift 2
	"$@" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "$what: exit $rc, expected $want"
		sed 's/^/  stderr: /' "$TMP/err" | head -5
		return 1
	fi
	echo "ok: $what (exit $rc)"
}

# one_error: stderr is exactly one line starting with "stepring: "
one_error() {
	if [ "$(wc -l <"$TMP/err")" -ne 1 ] || ! grep -q '^stepring: ' "$TMP/err"; then
		fail "$1: expected one 'stepring: ' error line, got:"
		sed 's/^/  /' "$TMP/err"
	fi
}

expect 0 "help" "$SR" bench loop --help
grep -q -- '--policy' "$TMP/out" || fail "help does not mention --policy"
"$SR" bench --help 2>&1 | grep -q '^ *loop' || fail "bench --help does not list loop"

for args in "--bogus" "--policy mlp:0x2" "--policy cnn:8x1" "--policy mlp:8x2:sigmoid" \
	"--device tpu" "--envs 0" "--mode sideways" "--seconds abc" "--env NoSuchEnv-v9" \
	"--envs 4 --batch 4" "--h2d --device host"; do
	# shellcheck disable=SC2086
	expect 2 "bad: $args" "$SR" bench loop $args && one_error "$args"
done

if ! "$SR" version | grep -q cuda; then
	expect 2 "cuda asked for in a build without it" "$SR" bench loop --device cuda &&
		one_error "--device cuda"
fi

expect 0 "short host loop" "$SR" bench loop --device host --env CartPole-v1 --envs 16 \
	--threads 1 --policy mlp:8x1 --seconds 0.05 --warmup 0 --json
for key in env_only_steps_per_sec loop_steps_per_sec ratio us_policy policy_macs; do
	grep -q "\"$key\":" "$TMP/out" || fail "JSON lacks $key"
done
grep -q '"device":"host"' "$TMP/out" || fail "JSON does not say device host"
grep -q '"policy_macs":48,' "$TMP/out" || fail "mlp:8x1 on CartPole: expected 4*8 + 8*2 = 48 MACs"
expect 0 "short sync box loop" "$SR" bench loop --device host --env Pendulum-v1 --envs 8 \
	--threads 1 --mode sync --policy mlp:4x2:relu --seconds 0.05 --warmup 0

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
