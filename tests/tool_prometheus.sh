#!/usr/bin/env bash
# stepring metrics scraped by a real Prometheus: a pool runs (rollout
# --ring-name), `stepring metrics NAME --listen 127.0.0.1:0` serves it, a
# Prometheus of this test's own (127.0.0.1, a free port, its own storage in
# a temporary directory) scrapes it every second; then
# rate(stepring_steps_total[10s]) from Prometheus' HTTP API must agree within
# 10% with the pool's own steps/s over the same 10 s (its statistics block,
# sampled by `stepring top --out`). Exit 77 (skipped) without Prometheus:
# Debian's package `prometheus` (tools/dev installs it), or $PROMETHEUS.
# usage: tool_prometheus.sh STEPRING
set -u
SR=$1
PY=/usr/bin/python3
PROM=${PROMETHEUS:-$(command -v prometheus || true)}
if [ -z "$PROM" ] || [ ! -x "$PROM" ]; then
	echo "SKIP: no prometheus binary (apt-get install prometheus, or set PROMETHEUS)"
	exit 77
fi
N=srtest-prom-$$
tmp=$(mktemp -d /tmp/srtest-prom-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	"$SR" ring rm --stale "$N" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	[ -f "$tmp/prom.log" ] && tail -5 "$tmp/prom.log" >&2
	exit 1
}
poll() { # poll SECONDS CMD...
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The pool, and its own record of its counters (every 0.25 s).
"$SR" rollout --env CartPole-v1 --envs 64 --threads 1 --bind none --steps 1000000000000 \
	--seconds 600 --ring-name "$N" >"$tmp/roll.txt" 2>&1 &
pids+=($!)
seen() { "$SR" metrics "$N" --once 2>/dev/null | grep -q '^stepring_pools 1$'; }
poll 60 seen || fail "the pool $N does not show up"
"$SR" top "$N" --plain --interval 0.25 --out "$tmp/own.jsonl" >/dev/null 2>&1 &
pids+=($!)
"$SR" metrics "$N" --listen 127.0.0.1:0 --interval 0.5 >"$tmp/srv.txt" 2>&1 &
pids+=($!)
poll 30 grep -q "serving http://127.0.0.1:[0-9]*/metrics" "$tmp/srv.txt" || fail "metrics: $(cat "$tmp/srv.txt")"
mport=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/srv.txt")

# Prometheus on a free port (picked, then bound by Prometheus: if another
# process takes it in between, try another).
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: stepring
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOF
ready() { $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$pport/-/ready', timeout=2)" 2>/dev/null; }
for try in 1 2 3; do
	pport=$(free_port)
	"$PROM" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data-$try" \
		--web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prom.log" 2>&1 &
	ppid=$!
	pids+=("$ppid")
	if poll 90 ready; then
		break
	fi
	kill "$ppid" 2>/dev/null
	[ "$try" = 3 ] && fail "prometheus did not become ready"
done

# Until Prometheus holds 15 s of samples of the pool's counter.
cat >"$tmp/query.py" <<'EOF'
import json, sys, urllib.parse, urllib.request
port, query = sys.argv[1], sys.argv[2]
args = {"query": query}
if len(sys.argv) > 3:
    args["time"] = sys.argv[3]
u = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(args)
d = json.load(urllib.request.urlopen(u, timeout=10))
assert d["status"] == "success", d
r = d["data"]["result"]
if not r:
    sys.exit(1)
print(r[0]["value"][1])
EOF
enough() {
	local n
	n=$($PY "$tmp/query.py" "$pport" "count_over_time(stepring_steps_total{pool=\"$N\"}[20s])" 2>/dev/null) &&
		[ "${n%.*}" -ge 15 ]
}
poll 120 enough || fail "prometheus has too few samples: $($PY "$tmp/query.py" "$pport" "count_over_time(stepring_steps_total[1m])" 2>&1)"
# Up: the target is scraped without errors.
up=$($PY "$tmp/query.py" "$pport" 'up{job="stepring"}') || fail "no up series"
[ "$up" = 1 ] || fail "the scrape fails: up=$up"

# rate() over [t-10s, t] against the pool's own steps over that window.
t=$($PY -c 'import time; print(f"{time.time() - 2:.3f}")')
prate=$($PY "$tmp/query.py" "$pport" "rate(stepring_steps_total{pool=\"$N\"}[10s])" "$t") ||
	fail "no rate() result"
$PY - "$tmp/own.jsonl" "$t" "$prate" <<'EOF' || fail "rate() disagrees with the pool's own steps/s"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t, prate = float(sys.argv[2]), float(sys.argv[3])
def at(x):  # the sample nearest to wall-clock time x
    return min(rows, key=lambda r: abs(r["unix_s"] - x))
a, b = at(t - 10), at(t)
assert abs(a["unix_s"] - (t - 10)) < 1 and abs(b["unix_s"] - t) < 1, "top's samples do not cover the window"
# The pool's own clock (the block's now_ns, as uptime_s) times its counter.
own = (b["steps"] - a["steps"]) / (b["uptime_s"] - a["uptime_s"])
ratio = prate / own
print(f"prometheus rate(stepring_steps_total[10s]) = {prate:.0f}/s, the pool's own = {own:.0f}/s, ratio {ratio:.3f}")
sys.exit(0 if 0.9 <= ratio <= 1.1 else 1)
EOF
# Other series made it too: the P99 and a time share.
$PY "$tmp/query.py" "$pport" "stepring_batch_latency_seconds{pool=\"$N\",quantile=\"0.99\"}" >/dev/null ||
	fail "no P99 series"
$PY "$tmp/query.py" "$pport" "sum(stepring_time_share_ratio{pool=\"$N\"})" >/dev/null || fail "no time shares"
echo "ok"
