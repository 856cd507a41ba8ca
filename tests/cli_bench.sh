#!/usr/bin/env bash
# Smoke test of every benchmark: each runs briefly and prints JSON with the
# fields its issue promises. No figure is judged here (goals live in the
# benchmarks' own output, not in tests): this checks they run and report.
# usage: cli_bench.sh STEPRING
set -u
sr=$1
PY=/usr/bin/python3
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

# The keys (a.b for nested) that no JSON line on stdin has.
HAS_KEYS='
import json, sys
keys = sys.argv[1].split()
objs = [json.loads(l) for l in sys.stdin if l.strip().startswith("{")]
assert objs, "no JSON object"
def has(o, k):
    for part in k.split("."):
        if not isinstance(o, dict) or part not in o:
            return False
        o = o[part]
    return True
missing = [k for k in keys if not any(has(o, k) for o in objs)]
assert not missing, "missing keys: %s" % missing
'

# bench NAME "key1 key2 ..." ARGS...: `stepring bench ARGS` exits 0 and
# prints JSON with every key.
bench() {
	local name=$1 keys=$2
	shift 2
	expect_rc 0 "$name" "$sr" bench "$@" || return
	if ! $PY -c "$HAS_KEYS" "$keys" <"$T/out" >"$T/check" 2>&1; then
		fail "$name: expected the keys '$keys' in its JSON, got:"
		tail -n 1 "$T/check" | sed 's/^/  check: /'
		_show stdout "$T/out"
	fi
}

bench "bench env" "env n_instances steps_per_sec ns_per_step" \
	env --env CartPole-v1 --seconds 0.1 --json
bench "bench pool sync" "steps_per_sec raw_steps_per_sec efficiency p50_us p90_us p99_us breakdown.share_env breakdown.share_wait workers" \
	pool --env CartPole-v1 --envs 64 --threads 1 --seconds 0.2 --warmup 0.05 --cooldown 0.05 --json
bench "bench pool async" "steps_per_sec efficiency p99_us breakdown breakdown.ns_send breakdown.share_send batch_groups" \
	pool --env CartPole-v1 --envs 64 --threads 1 --batch 32 --seconds 0.2 --warmup 0.05 --cooldown 0.05 --json
bench "bench ring" "what producers bulk ns_per_transition" \
	ring --seconds 0.02 --repeat 1 --capacity 4096 --json
bench "bench replay" "what transitions_per_s time_vs_memcpy" \
	replay --seconds 0.02 --repeat 1 --obs-dims 4 --capacity 4096 --json
bench "bench loop" "env_only_steps_per_sec loop_steps_per_sec ratio us_policy" \
	loop --envs 64 --threads 1 --policy mlp:8x1 --device host --seconds 0.2 --warmup 0.05 --json
bench "bench checkpoint" "phases throughput.ratio goals.p99_uring_over_none" \
	checkpoint --envs 64 --threads 1 --replay-mib 8 --seconds 0.3 --json
bench "bench checkpoint --procs" "threads.snapshot_us procs.snapshot_us procs.checkpoint_ms snapshot_ratio checkpoint_ratio" \
	checkpoint --procs --envs 64 --threads 1 --rounds 3 --json

finish
