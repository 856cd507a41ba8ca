#!/usr/bin/env bash
# CLI checks of the pool commands: rollout hashes equal across 1, 2, 3
# threads and sync/async; topo plans; bad options exit 2 with one line.
set -u
SR=$1
fail() { echo "FAIL: $*"; exit 1; }

h1=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 1 --seed 5 --steps 300 --hash) || fail "rollout 1 thread"
[[ $h1 =~ ^[0-9a-f]{16}$ ]] || fail "hash format '$h1'"
# 3 threads on a described 4-core topology, so it runs on small machines too
h2=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 2 --bind none --synthetic "core:4 pu:1" --seed 5 --steps 300 --hash) || fail "rollout 2 threads"
h3=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 3 --synthetic "core:4 pu:1" --seed 5 --steps 300 --hash) || fail "rollout 3 threads"
ha=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 2 --synthetic "core:4 pu:1" --mode async --batch 7 --seed 5 --steps 300 --hash) || fail "rollout async"
[ "$h1" = "$h2" ] || fail "1 vs 2 threads: $h1 $h2"
[ "$h1" = "$h3" ] || fail "1 vs 3 threads: $h1 $h3"
[ "$h1" = "$ha" ] || fail "sync vs async: $h1 $ha"
h4=$("$SR" rollout --env CartPole-v1 --envs 24 --threads 1 --seed 6 --steps 300 --hash)
[ "$h1" != "$h4" ] || fail "seed does not change the hash"
hp1=$("$SR" rollout --env Pendulum-v1 --envs 10 --threads 1 --seed 1 --steps 50 --autoreset same --hash)
hp3=$("$SR" rollout --env Pendulum-v1 --envs 10 --threads 3 --synthetic "core:4 pu:1" --seed 1 --steps 50 --autoreset same --hash)
[ "$hp1" = "$hp3" ] || fail "pendulum same-step 1 vs 3 threads"

out=$("$SR" topo --synthetic "pack:2 numa:2 core:8 pu:2" --threads 4) || fail "topo"
for n in 0 1 2 3; do
	grep -q "numa $n" <<<"$out" || fail "topo: no worker on numa $n: $out"
done
"$SR" topo --help | grep -q "usage: stepring topo" || fail "topo --help"
# The collector near a device on NUMA node 1.
out=$("$SR" topo --synthetic "numa:2 core:4 pu:2" --threads 4 --near 8-15) || fail "topo --near"
grep -q "^worker 0: cpus 8 core 4 numa 1" <<<"$out" || fail "topo --near: worker 0 not on node 1: $out"
grep -q "device near cpus 8-15: worker 0 (the collector) on cpus 8" <<<"$out" || fail "topo --near: $out"
"$SR" rollout --help | grep -q "usage: stepring rollout" || fail "rollout --help"
"$SR" bench pool --help | grep -q "usage: stepring bench pool" || fail "bench pool --help"

bad() { # expect exit 2 and one line on stderr
	local err rc
	err=$("$SR" "$@" 2>&1 >/dev/null); rc=$?
	[ $rc -eq 2 ] || fail "'$*' exit $rc (want 2)"
	[ "$(wc -l <<<"$err")" -eq 1 ] || fail "'$*' printed: $err"
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
j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 1 --seconds 0.1 --warmup 0 --cooldown 0 --json) || fail "bench pool json"
for k in steps_per_sec raw_steps_per_sec efficiency p50_us p90_us p99_us breakdown; do
	grep -q "\"$k\":" <<<"$j" || fail "bench pool json lacks $k"
done
python3 -c 'import json,sys; json.loads(sys.argv[1])' "$j" 2>/dev/null || [ ! -x /usr/bin/python3 ] || fail "bench pool json does not parse"
grep -q '"ring_capacity":1024,' <<<"$j" || fail "bench pool json: default ring capacity: $j"
grep -q '"cpu_balance":0.0000,' <<<"$j" || fail "bench pool json: cpu_balance with one thread: $j"
grep -q '"equal_cpu_rounds":0,' <<<"$j" || fail "bench pool json: equal-CPU rounds with one thread: $j"
j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 1 --seconds 0.05 --warmup 0 --cooldown 0 --ring-capacity 8192 --json) || fail "bench pool --ring-capacity"
grep -q '"ring_capacity":8192,' <<<"$j" || fail "bench pool json: ring capacity 8192: $j"
# Two threads (bind none: any machine): the lockstep raw loops, a barrier
# after each one's share of a batch, end and give a rate (sync and async).
num() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" <<<"$2"; }
for m in "--mode sync" "--mode async --batch 32"; do
	j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 2 --bind none $m --seconds 0.2 --warmup 0 --cooldown 0 --json) || fail "bench pool 2 threads $m"
	awk -v r="$(num raw_lockstep_steps_per_sec "$j")" -v s="$(num lockstep_scaling "$j")" \
	    -v e="$(num efficiency_lockstep "$j")" \
	    'BEGIN { exit !(r > 0 && s > 0 && s < 2 && e > 0) }' ||
		fail "bench pool $m: lockstep figures: $j"
	# Each CPU's raw loop (all at once) and their balance, slowest / fastest.
	awk -v b="$(num cpu_balance "$j")" 'BEGIN { exit !(b > 0 && b <= 1) }' ||
		fail "bench pool $m: cpu_balance: $j"
	[ "$(grep -o '"raw_parallel_steps_per_sec":[1-9][0-9.]*,"rows":[0-9]*}' <<<"$j" | wc -l)" -eq 2 ] ||
		fail "bench pool $m: per-worker raw rates: $j"
	# Each round's figures, and the equal-CPU rounds' count and median
	# taken from them (rounds whose raw loops at once scaled >= 0.95 with
	# balance >= 0.95).
	if [ -x /usr/bin/python3 ]; then
		/usr/bin/python3 - "$j" <<'PY' || fail "bench pool $m: round figures: $j"
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
	[ "$(grep -o '"rows":[0-9]*' <<<"$j" | awk -F: '{ s += $2 } END { print s }')" -eq 64 ] ||
		fail "bench pool $m: rows: $j"
done
# --no-rebalance: each worker steps its own slice, and the JSON says so.
j=$("$SR" bench pool --env CartPole-v1 --envs 64 --threads 2 --bind none --no-rebalance --seconds 0.2 --warmup 0 --cooldown 0 --json) || fail "bench pool --no-rebalance"
grep -q '"no_rebalance":true,' <<<"$j" || fail "bench pool --no-rebalance: json: $j"
[ "$(grep -o '"envs":32,[^}]*"rows":32}' <<<"$j" | wc -l)" -eq 2 ] || fail "bench pool --no-rebalance: rows: $j"
# The goals script: every configuration runs and gets a line (figures not judged).
nt=$(($(nproc) >= 2 ? 2 : 1))
g=$(THREADS=$nt RUNS=1 SECS=0.05 WARMUP=0 COOLDOWN=0 bash "$(dirname "$0")/../tools/pool_goals.sh" "$SR") ||
	fail "pool_goals.sh: $g"
for c in "sync      0.9 " "async     0.85" "spin      0.97" "sync_1t   -" "async_1t  -"; do
	grep -q "^$c" <<<"$g" || fail "pool_goals.sh: no line for '$c': $g"
done
[ "$(grep -cE ' (yes|no) ' <<<"$g")" -eq 3 ] || fail "pool_goals.sh: met column: $g"
# The env cost sweep: a line per cost, the raw loop's ns a step rising with it.
g=$(COSTS="0 400" THREADS=$nt RUNS=1 SECS=0.05 WARMUP=0 COOLDOWN=0 ENVS=64 \
	bash "$(dirname "$0")/../tools/env_cost_sweep.sh" "$SR") || fail "env_cost_sweep.sh: $g"
r0=$(awk '$1 == "0" { print $2 }' <<<"$g")
r1=$(awk '$1 == "400" { print $2 }' <<<"$g")
awk -v a="$r0" -v b="$r1" 'BEGIN { exit !(a > 0 && b > a + 200) }' ||
	fail "env_cost_sweep.sh: raw ns a step at cost 0 and 400: $g"
echo ok
