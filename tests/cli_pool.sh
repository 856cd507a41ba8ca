#!/usr/bin/env bash
# CLI checks of the pool commands: rollout hashes equal across 1, 2, 3
# threads and sync/async; topo plans; bad options exit 2 with one line.
set -u
SR=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

h1=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 1 --seed 5 --steps 300 --hash) || fail "rollout 1 thread: exit $?, expected 0"
expect_line -Ex "hash format" '[0-9a-f]{16}' <<<"$h1"
# 3 threads on a described 4-core topology, so it runs on small machines too
h2=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 2 --bind none --synthetic "core:4 pu:1" --seed 5 --steps 300 --hash) || fail "rollout 2 threads: exit $?, expected 0"
h3=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 3 --synthetic "core:4 pu:1" --seed 5 --steps 300 --hash) || fail "rollout 3 threads: exit $?, expected 0"
ha=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 2 --synthetic "core:4 pu:1" --mode async --batch 7 --seed 5 --steps 300 --hash) || fail "rollout async: exit $?, expected 0"
expect_eq "2 threads as 1" "$h1" "$h2"
expect_eq "3 threads as 1" "$h1" "$h3"
expect_eq "async as sync" "$h1" "$ha"
h4=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 1 --seed 6 --steps 300 --hash)
expect_ne "another seed, another hash" "$h1" "$h4"
hp1=$("$SR" rollout --env Pendulum-v1 --envs 10 --threads 1 --seed 1 --steps 50 --autoreset same --hash)
hp3=$("$SR" rollout --env Pendulum-v1 --envs 10 --threads 3 --synthetic "core:4 pu:1" --seed 1 --steps 50 --autoreset same --hash)
expect_eq "pendulum same-step: 3 threads as 1" "$hp1" "$hp3"

out=$("$SR" topo --synthetic "pack:2 numa:2 core:8 pu:2" --threads 4) || fail "topo: exit $?, expected 0"
for n in 0 1 2 3; do
	expect_line "topo: a worker on numa $n" "numa $n" <<<"$out"
done
"$SR" topo --help | expect_line "topo --help" "usage: stepring topo"
# The collector near a device on NUMA node 1.
out=$("$SR" topo --synthetic "numa:2 core:4 pu:2" --threads 4 --near 8-15) || fail "topo --near: exit $?, expected 0"
expect_line "topo --near: worker 0 on node 1" "^worker 0: cpus 8 core 4 numa 1" <<<"$out"
expect_line "topo --near: the collector" "device near cpus 8-15: worker 0 (the collector) on cpus 8" <<<"$out"
"$SR" rollout --help | expect_line "rollout --help" "usage: stepring rollout"
"$SR" bench pool --help | expect_line "bench pool --help" "usage: stepring bench pool"

bad() { # exit 2, one line on stderr, nothing on stdout
	expect_usage_error "$SR" "$@"
}
bad rollout --env NoSuchEnv --hash
bad rollout --env CartPole-v1 --envs 0
bad rollout --env CartPole-v1 --threads 9999 --synthetic "core:2 pu:1"
bad rollout --env CartPole-v1 --cpuset 0-999999
bad rollout --env CartPole-v1 --frob
bad topo --synthetic "nonsense:4"
bad topo --bind wrong
bad topo --near x
bad topo --near-gpu 0 --near 1
bad topo --threads 99 --synthetic "core:2 pu:1"
bad bench pool --env CartPole-v1 --envs 8 --mode async --batch 8
bad bench pool --env NoSuchEnv
bad bench pool --seconds x
bad bench pool --envs 64 --ring-capacity 1000
bad bench pool --envs 64 --ring-capacity 128
j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 1 --seconds 0.1 --warmup 0 --cooldown 0 --json) || fail "bench pool json: exit $?, expected 0"
for k in steps_per_sec raw_steps_per_sec efficiency p50_us p90_us p99_us breakdown; do
	expect_line "bench pool json has $k" "\"$k\":" <<<"$j"
done
python3 -c 'import json,sys; json.loads(sys.argv[1])' "$j" 2>/dev/null || [ ! -x /usr/bin/python3 ] ||
	fail "bench pool json: expected JSON, got: $j"
expect_line "bench pool json: default ring capacity" '"ring_capacity":1024,' <<<"$j"
expect_line "bench pool json: cpu_balance with one thread" '"cpu_balance":0.0000,' <<<"$j"
expect_line "bench pool json: equal-CPU rounds with one thread" '"equal_cpu_rounds":0,' <<<"$j"
j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 1 --seconds 0.05 --warmup 0 --cooldown 0 --ring-capacity 8192 --json) || fail "bench pool --ring-capacity: exit $?, expected 0"
expect_line "bench pool json: ring capacity 8192" '"ring_capacity":8192,' <<<"$j"
# Two threads (bind none: any machine): the lockstep raw loops, a barrier
# after each one's share of a batch, end and give a rate (sync and async).
num() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" <<<"$2"; }
for m in "--mode sync" "--mode async --batch 32"; do
	# shellcheck disable=SC2086 # $m is two or four words
	j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 2 --bind none $m --seconds 0.2 --warmup 0 --cooldown 0 --json) || fail "bench pool 2 threads $m"
	expect_num "bench pool $m: raw_lockstep_steps_per_sec" "$(num raw_lockstep_steps_per_sec "$j")" ">" 0
	expect_num "bench pool $m: lockstep_scaling" "$(num lockstep_scaling "$j")" ">" 0
	expect_num "bench pool $m: lockstep_scaling" "$(num lockstep_scaling "$j")" "<" 2
	expect_num "bench pool $m: efficiency_lockstep" "$(num efficiency_lockstep "$j")" ">" 0
	# Each CPU's raw loop (all at once) and their balance, slowest / fastest.
	expect_num "bench pool $m: cpu_balance" "$(num cpu_balance "$j")" ">" 0
	expect_num "bench pool $m: cpu_balance" "$(num cpu_balance "$j")" "<=" 1
	grep -o '"raw_parallel_steps_per_sec":[1-9][0-9.]*,"rows":[0-9]*}' <<<"$j" |
		expect_lines "bench pool $m: per-worker raw rates in $j" 2
	# Each round's figures, and the equal-CPU rounds' count and median
	# taken from them (rounds whose raw loops at once scaled >= 0.95 with
	# balance >= 0.95).
	if [ -x /usr/bin/python3 ]; then
		/usr/bin/python3 - "$j" <<'PY' || fail "bench pool $m: round figures (the assertion above) in: $j"
import json, statistics, sys
d = json.loads(sys.argv[1])
f = d["round_fields"]
rows = d["round_figures"]
assert f[:4] == ["efficiency", "efficiency_parallel", "parallel_scaling", "cpu_balance"], f
assert len(rows) == d["rounds"] and all(len(r) == len(f) for r in rows), rows
assert all(r[0] > 0 and 0 < r[3] <= 1 for r in rows), rows
eq = [r[0] for r in rows if r[2] >= 0.95 and r[3] >= 0.95]
assert d["equal_cpu_rounds"] == len(eq), (d["equal_cpu_rounds"], eq)
want = statistics.median(eq) if eq else 0
assert abs(d["efficiency_equal_cpus"] - want) < 1e-3, (d["efficiency_equal_cpus"], want)
PY
	fi
	# Rows per worker add up to the envs.
	expect_eq "bench pool $m: rows of the workers" 64 \
		"$(grep -o '"rows":[0-9]*' <<<"$j" | awk -F: '{ s += $2 } END { print s }')"
done
# --no-rebalance: each worker steps its own slice, and the JSON says so.
j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 2 --bind none --no-rebalance --seconds 0.2 --warmup 0 --cooldown 0 --json) || fail "bench pool --no-rebalance: exit $?, expected 0"
expect_line "bench pool --no-rebalance: json" '"no_rebalance":true,' <<<"$j"
grep -o '"envs":32,[^}]*"rows":32}' <<<"$j" |
	expect_lines "bench pool --no-rebalance: workers of 32 envs and 32 rows in $j" 2
# The goals script: every configuration runs and gets a line (figures not judged).
nt=$(($(nproc) >= 2 ? 2 : 1))
g=$(THREADS=$nt RUNS=1 SECS=0.05 WARMUP=0 COOLDOWN=0 bash "$(dirname "$0")/../tools/pool_goals.sh" "$SR") ||
	fail "pool_goals.sh: $g"
for c in "sync      0.9 " "async     0.85" "spin      0.97" "sync_1t   -" "async_1t  -"; do
	expect_line "pool_goals.sh: a line for '$c'" "^$c" <<<"$g"
done
grep -E ' (yes|no) ' <<<"$g" | expect_lines "pool_goals.sh: met column in $g" 3
# The env cost sweep: a line per cost, the raw loop's ns a step rising with it.
g=$(COSTS="0 400" THREADS=$nt RUNS=1 SECS=0.05 WARMUP=0 COOLDOWN=0 ENVS=64 \
	bash "$(dirname "$0")/../tools/env_cost_sweep.sh" "$SR") || fail "env_cost_sweep.sh: $g"
r0=$(awk '$1 == "0" { print $2 }' <<<"$g")
r1=$(awk '$1 == "400" { print $2 }' <<<"$g")
expect_num "env_cost_sweep.sh: raw ns a step at cost 0" "$r0" ">" 0
expect_num "env_cost_sweep.sh: raw ns a step at cost 400 (vs $r0 + 200)" "$r1" ">" "$(awk -v a="$r0" 'BEGIN { print a + 200 }')"
finish
