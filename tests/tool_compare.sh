#!/usr/bin/env bash
# stepring compare: each verdict of the rule on crafted sweep and bench
# records (exact exit statuses), configurations and machines that do not
# match named, bad files refused with one line and exit 2. Real runs are
# tool_compare_real.sh's.
# usage: tool_compare.sh STEPRING
set -u
SR=$1
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/srtest-compare-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
expect_rc() { # expect_rc RC CMD...: the output in $out
	local want=$1
	shift
	out=$("$@" 2>&1)
	local rc=$?
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, wanted $want: $out"
}
bad() { # bad ARGS...: exit 2 with one line
	expect_rc 2 "$SR" compare "$@"
	[ "$(wc -l <<<"$out")" = 1 ] || fail "compare $*: not one line: $out"
	grep -q "^stepring: " <<<"$out" || fail "compare $*: $out"
}

# Crafted records: sweep lines whose rounds are drawn around a median with
# a relative spread (seeded), bench pool and bench env lines the same way.
cat >"$tmp/make.py" <<'EOF'
import json, random, sys
# make.py OUT KIND THR SPREAD P99 P99SPREAD RECORDS ROUNDS [ENV] [CPU_MODEL] [SEED]
out, kind = sys.argv[1], sys.argv[2]
thr, ts, p99, ps = map(float, sys.argv[3:7])
nrec, nround = int(sys.argv[7]), int(sys.argv[8])
env = sys.argv[9] if len(sys.argv) > 9 else "spin:cost_us=1"
cpu = sys.argv[10] if len(sys.argv) > 10 else "Test CPU"
rng = random.Random(int(sys.argv[11]) if len(sys.argv) > 11 else 1)
machine = {"cpu_model": cpu, "cpus": 2, "cores": 2, "numa_nodes": 1, "gpu": "none", "loadavg_1m": 0.5}
with open(out, "a") as f:
    for r in range(nrec):
        rt = [thr * (1 + rng.uniform(-ts, ts)) for _ in range(nround)]
        rp = [p99 * (1 + rng.uniform(-ps, ps)) for _ in range(nround)]
        st = sorted(rt)[len(rt) // 2] if rt else thr
        sp = sorted(rp)[len(rp) // 2] if rp else p99
        if kind == "sweep":
            d = {"schema": "stepring.sweep/1", "machine": machine,
                 "build": {"info": "stepring test build"},
                 "config": {"env": env, "num_envs": 16, "threads": 1, "batch": 16, "mode": "sync",
                            "seconds": 1, "threads_requested": 1},
                 "result": {"steps_per_sec": st, "p99_us": sp}}
            if nround:
                d["result"]["rounds"] = {"steps_per_sec": rt, "p99_us": rp}
        elif kind == "pool":
            d = {"bench": "pool", "env": env, "envs": 16, "threads": 1, "batch": 16, "mode": "sync",
                 "seconds": 1, "steps_per_sec": st, "p99_us": sp, "round_steps_per_sec": rt,
                 "round_p99_us": rp, "machine": machine, "build": "stepring test build"}
        else:
            d = {"bench": "env", "env": "Spin-v0", "spec": env, "n_instances": 256, "cpu": -1,
                 "steps_per_sec": st, "steps_per_sec_runs": rt, "machine": machine,
                 "build": "stepring test build"}
        f.write(json.dumps(d) + "\n")
EOF
mk() { $PY "$tmp/make.py" "$@" || fail "make.py $*"; }
case_() { # case_ NAME BASE-ARGS... -- NEW-ARGS...: files $tmp/NAME.base, .new
	local name=$1 a=() b=()
	shift
	while [ "$1" != "--" ]; do a+=("$1"); shift; done
	shift
	b=("$@")
	rm -f "$tmp/$name.base" "$tmp/$name.new"
	mk "$tmp/$name.base" "${a[@]}"
	mk "$tmp/$name.new" "${b[@]}"
}
verdict() { # verdict NAME RC WORD [COMPARE-ARGS...]
	local name=$1 rc=$2 word=$3
	shift 3
	expect_rc "$rc" "$SR" compare "$tmp/$name.base" "$tmp/$name.new" "$@"
	grep -q "^verdict: $word (exit $rc)$" <<<"$out" || fail "$name: $out"
}

# --- the rule
case_ better_thr sweep 1000 0.01 50 0.01 3 8 -- sweep 1200 0.01 50 0.01 3 8 spin:cost_us=1 "Test CPU" 2
verdict better_thr 0 better
grep -q "steps/s .* +20\.[0-9]%" <<<"$out" || fail "better_thr change: $out"
grep -q "throughput rose, P99 no worse" <<<"$out" || fail "better_thr why: $out"
case_ better_p99 sweep 1000 0.01 50 0.01 3 8 -- sweep 1000 0.01 35 0.01 3 8 spin:cost_us=1 "Test CPU" 2
verdict better_p99 0 better
grep -q "P99 fell, throughput no worse" <<<"$out" || fail "better_p99: $out"
case_ same sweep 1000 0.02 50 0.02 3 8 -- sweep 1000 0.02 50 0.02 3 8 spin:cost_us=1 "Test CPU" 2
verdict same 3 "no change"
case_ worse_thr sweep 1000 0.01 50 0.01 3 8 -- sweep 850 0.01 50 0.01 3 8 spin:cost_us=1 "Test CPU" 2
verdict worse_thr 4 worse
grep -q "throughput fell" <<<"$out" || fail "worse_thr: $out"
case_ worse_p99 sweep 1000 0.01 50 0.01 3 8 -- sweep 1000 0.01 65 0.01 3 8 spin:cost_us=1 "Test CPU" 2
verdict worse_p99 4 worse
grep -q "P99 rose" <<<"$out" || fail "worse_p99: $out"
# Throughput up 20% with P99 up 30%: a side effect, so not better.
case_ side sweep 1000 0.01 50 0.01 3 8 -- sweep 1200 0.01 65 0.01 3 8 spin:cost_us=1 "Test CPU" 2
verdict side 4 worse
# A 12% gain measured with +-20% spread: an interval across the threshold.
case_ noisy sweep 1000 0.2 50 0.01 3 8 -- sweep 1120 0.2 50 0.01 3 8 spin:cost_us=1 "Test CPU" 2
verdict noisy 5 "too noisy"
grep -q "rerun with more rounds" <<<"$out" || fail "noisy: $out"
# One record without rounds a side: no spread, no verdict.
case_ few sweep 1000 0 50 0 1 0 -- sweep 2000 0 50 0 1 0 spin:cost_us=1 "Test CPU" 2
verdict few 5 "too noisy"
grep -q "fewer than 3 samples" <<<"$out" || fail "few: $out"
# Three repeats without rounds: the records are the samples.
case_ repeats sweep 1000 0.01 50 0.01 3 0 -- sweep 700 0.01 50 0.01 3 0 spin:cost_us=1 "Test CPU" 2
verdict repeats 4 worse
grep -q "over 3 / 3 records" <<<"$out" || fail "repeats: $out"
# The thresholds are options: a 12% gain is no change at 15%.
case_ thr sweep 1000 0.01 50 0.01 3 8 -- sweep 1120 0.01 50 0.01 3 8 spin:cost_us=1 "Test CPU" 2
verdict thr 0 better
verdict thr 3 "no change" --throughput-pct 15
# bench pool lines (round arrays at the top level) and bench env (runs).
case_ pool pool 1000 0.01 50 0.01 2 6 -- pool 500 0.01 50 0.01 2 6 spin:cost_us=1 "Test CPU" 2
verdict pool 4 worse
grep -q "^bench pool env=spin:cost_us=1 envs=16" <<<"$out" || fail "pool key: $out"
case_ env env 1000 0.01 0 0 1 5 -- env 1000 0.01 0 0 1 5 spin:cost_us=1 "Test CPU" 2
verdict env 3 "no change"
grep -q "p99_us .*(not in these records)" <<<"$out" || fail "env without P99: $out"
# The same file twice: no change.
expect_rc 3 "$SR" compare "$tmp/same.base" "$tmp/same.base"

# --- several configurations: the worst decides, the unmatched are named
rm -f "$tmp/multi.base" "$tmp/multi.new"
mk "$tmp/multi.base" sweep 1000 0.01 50 0.01 3 8 spin:cost_us=1
mk "$tmp/multi.base" sweep 1000 0.01 50 0.01 3 8 spin:cost_us=2
mk "$tmp/multi.base" sweep 1000 0.01 50 0.01 3 8 spin:cost_us=3
mk "$tmp/multi.new" sweep 1300 0.01 50 0.01 3 8 spin:cost_us=1 "Test CPU" 2
mk "$tmp/multi.new" sweep 800 0.01 50 0.01 3 8 spin:cost_us=2 "Test CPU" 2
mk "$tmp/multi.new" sweep 1000 0.01 50 0.01 3 8 spin:cost_us=4 "Test CPU" 2
verdict multi 4 worse
grep -q "2 compared: 1 better, 0 no change, 1 worse, 0 too noisy; not compared: 1 only in base, 1 only in new" <<<"$out" ||
	fail "multi summary: $out"
grep -q "only in .*multi.base (line 7): sweep env=spin:cost_us=3 " <<<"$out" || fail "multi: base-only not named: $out"
grep -q "only in .*multi.new (line 7): sweep env=spin:cost_us=4 " <<<"$out" || fail "multi: new-only not named: $out"
# --ignore env matches one env against another.
rm -f "$tmp/ign.base" "$tmp/ign.new"
mk "$tmp/ign.base" sweep 1000 0.01 50 0.01 3 8 spin:cost_us=1
mk "$tmp/ign.new" sweep 500 0.01 100 0.01 3 8 spin:cost_us=2 "Test CPU" 2
expect_rc 2 "$SR" compare "$tmp/ign.base" "$tmp/ign.new"
grep -q "no configuration of .* is in" <<<"$out" || fail "ign: $out"
verdict ign 4 worse --ignore env
# --json: one line per configuration and a summary.
expect_rc 4 "$SR" compare "$tmp/multi.base" "$tmp/multi.new" --json
printf '%s\n' "$out" >"$tmp/json.txt"
$PY - "$tmp/json.txt" <<'EOF' || fail "--json: $out"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
s = lines[-1]["summary"]
assert s["compared"] == 2 and s["better"] == 1 and s["worse"] == 1 and s["verdict"] == "worse" and s["exit"] == 4, s
v = {l["config"].split()[1]: l for l in lines[:-1]}
assert v["env=spin:cost_us=1"]["verdict"] == "better"
assert abs(v["env=spin:cost_us=1"]["throughput"]["change"] - 0.3) < 0.02
assert v["env=spin:cost_us=2"]["verdict"] == "worse"
assert v["env=spin:cost_us=3"]["why"] == "only in base" and v["env=spin:cost_us=4"]["why"] == "only in new"
EOF
# Another machine: named, not compared (unless --any-machine).
rm -f "$tmp/mach.base" "$tmp/mach.new"
mk "$tmp/mach.base" sweep 1000 0.01 50 0.01 3 8 spin:cost_us=1 "CPU A"
mk "$tmp/mach.new" sweep 1000 0.01 50 0.01 3 8 spin:cost_us=1 "CPU B" 2
expect_rc 2 "$SR" compare "$tmp/mach.base" "$tmp/mach.new"
grep -q "not compared: machines differ" <<<"$out" || fail "machines: $out"
grep -q "base: cpu_model=CPU A cpus=2" <<<"$out" || fail "machines named: $out"
verdict mach 3 "no change" --any-machine

# --- bad input: one line, exit 2
expect_rc 0 "$SR" compare --help
grep -q "Exit status: 0 better, 3 no change, 4 worse, 5 too noisy" <<<"$out" || fail "help: $out"
bad
bad "$tmp/same.base"
bad "$tmp/same.base" "$tmp/same.new" "$tmp/same.new"
bad "$tmp/same.base" "$tmp/same.new" --frob
bad "$tmp/same.base" "$tmp/same.new" --throughput-pct 0
bad "$tmp/same.base" "$tmp/same.new" --p99-pct x
bad "$tmp/same.base" "$tmp/same.new" --ignore env --ignore ,
bad "$tmp/nonexistent.jsonl" "$tmp/same.new"
printf '{"schema":"stepring.sweep/1",\n' >"$tmp/trunc.jsonl"
bad "$tmp/trunc.jsonl" "$tmp/same.new"
grep -q "trunc.jsonl:1: not JSON" <<<"$out" || fail "truncated: $out"
printf '[1,2]\n' >"$tmp/arr.jsonl"
bad "$tmp/same.base" "$tmp/arr.jsonl"
grep -q "arr.jsonl:1: not a JSON object" <<<"$out" || fail "array: $out"
: >"$tmp/empty.jsonl"
bad "$tmp/empty.jsonl" "$tmp/same.new"
grep -q "no sweep or bench records" <<<"$out" || fail "empty: $out"
printf '{"schema":"stepring.top/1","steps":5}\n' >"$tmp/top.jsonl"
bad "$tmp/top.jsonl" "$tmp/same.new"
grep -q 'schema "stepring.top/1"' <<<"$out" || fail "top samples: $out"
printf '{"a":1}\0\n' >"$tmp/nul.jsonl"
bad "$tmp/nul.jsonl" "$tmp/same.new"
$PY -c 'print("[" * 100000)' >"$tmp/deep.jsonl"
bad "$tmp/deep.jsonl" "$tmp/same.new"
grep -q "nested deeper than" <<<"$out" || fail "deep: $out"
printf '{"bench":"pool","steps_per_sec":1e999}\n' >"$tmp/inf.jsonl"
bad "$tmp/inf.jsonl" "$tmp/same.new"
bad "$tmp" "$tmp/same.new" # a directory
# A read that fails (not the input's fault): a run-time failure, exit 1.
if [ -r /proc/self/mem ]; then
	expect_rc 1 "$SR" compare /proc/self/mem "$tmp/same.new"
	grep -q "Input/output error" <<<"$out" || fail "read error: $out"
fi

echo "ok"
