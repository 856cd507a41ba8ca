#!/usr/bin/env bash
# stepring metrics against live pools (rollout --ring-name, in the
# background): the exposition (names, types, escaping, promtool's lint when
# installed, OpenMetrics), the HTTP server (GET /metrics, bad requests
# answered, idle connections not blocking it), the textfile, the JSONL time
# series and its plot, a version 1 block, a pool that ends and a stale
# segment disappearing, the Grafana dashboard's metric names, bad arguments.
# usage: tool_metrics.sh STEPRING SOURCE_DIR
set -u
SR=$1
SRC=$2
PY=/usr/bin/python3
N=srtest-metrics-$$
Q="srtest-m\"q\\b-$$" # a name with a quote and a backslash: label escaping
tmp=$(mktemp -d /tmp/srtest-metrics-XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	"$SR" ring rm --stale "$N" "$N-stale" "$N-procs" "$Q" >/dev/null 2>&1
	rm -f "/dev/shm/$N-v1.stats"
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
# poll SECONDS CMD...: run CMD until it succeeds, at most SECONDS.
poll() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}
expect_rc() { # expect_rc RC CMD...: the output in $out
	local want=$1
	shift
	out=$("$@" 2>&1)
	local rc=$?
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, wanted $want: $out"
}
bad() { # bad ARGS...: exit 2 with one line
	expect_rc 2 "$SR" metrics "$@"
	[ "$(wc -l <<<"$out")" = 1 ] || fail "metrics $*: not one line: $out"
	grep -q "^stepring: " <<<"$out" || fail "metrics $*: $out"
}
once() { "$SR" metrics "$@" --once; }
pool_seen() { once "$1" 2>/dev/null | grep -q '^stepring_pools 1$'; }

# --- arguments
expect_rc 0 "$SR" metrics --help
grep -q "usage: stepring metrics" <<<"$out" || fail "help: $out"
bad
bad --frob
bad --listen 127.0.0.1:99999
bad --listen abc:def
bad --listen ::1:80
bad --interval 0
bad --count -1
bad --openmetrics
bad --once --listen 127.0.0.1:0
bad --textfile "$tmp/nonexistent"
bad 'a/b' --once
expect_rc 1 "$SR" metrics --listen 256.1.1.1:0
grep -q "cannot listen" <<<"$out" || fail "bad address: $out"

# --- no pool of that name: only the pool count
expect_rc 0 "$SR" metrics "$N" --once
[ "$(grep -v '^#' <<<"$out")" = "stepring_pools 0" ] || fail "no pool: $out"

# --- a live pool
"$SR" rollout --env CartPole-v1 --envs 32 --threads 1 --bind none --steps 1000000000000 \
	--seconds 300 --ring-name "$N" >"$tmp/roll.txt" 2>&1 &
roll=$!
pids+=("$roll")
poll 60 pool_seen "$N" || fail "metrics does not see the pool $N: $(once "$N" 2>&1 | head)"
once "$N" >"$tmp/once.txt" || fail "--once"
for want in \
	'# TYPE stepring_steps_total counter' \
	"stepring_steps_total{pool=\"$N\",env=\"CartPole-v1\",worker_kind=\"threads\",mode=\"sync\"} " \
	'# TYPE stepring_batch_latency_seconds summary' \
	"stepring_batch_latency_seconds{pool=\"$N\",env=\"CartPole-v1\",worker_kind=\"threads\",mode=\"sync\",quantile=\"0.99\"} " \
	"stepring_batch_latency_seconds_count{pool=\"$N\"" \
	"stepring_time_seconds_total{pool=\"$N\",env=\"CartPole-v1\",worker_kind=\"threads\",mode=\"sync\",part=\"env_step\"} " \
	"stepring_time_share_ratio{pool=\"$N\",env=\"CartPole-v1\",worker_kind=\"threads\",mode=\"sync\",part=\"caller\"} " \
	"stepring_envs{pool=\"$N\",env=\"CartPole-v1\",worker_kind=\"threads\",mode=\"sync\"} 32" \
	"stepring_workers{pool=\"$N\"" \
	"stepring_process_cpu_seconds_total{pool=\"$N\"" \
	"stepring_process_resident_memory_bytes{pool=\"$N\"" \
	"stepring_worker_utilization_ratio{pool=\"$N\",env=\"CartPole-v1\",worker_kind=\"threads\",mode=\"sync\",worker=\"0\"} " \
	'# TYPE stepring_faults_total counter' '# TYPE stepring_restarts_total counter' \
	'# TYPE stepring_fault_rows_total counter' '# TYPE stepring_nonfinite_rows_total counter'; do
	grep -qF -- "$want" "$tmp/once.txt" || fail "--once lacks '$want': $(cat "$tmp/once.txt")"
done
# Every family once, HELP before TYPE, the shares summing to 1.
$PY - "$tmp/once.txt" "$N" <<'EOF' || fail "exposition checks"
import sys, re
text = open(sys.argv[1]).read()
assert text.endswith("\n")
types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
names = [t[0] for t in types]
assert len(names) == len(set(names)), "a family twice"
for name, typ in types:
    assert re.match(r"^stepring_[a-z0-9_]+$", name), name
    if typ == "counter":
        assert name.endswith("_total"), name
    elif name.endswith("_total"):
        raise AssertionError(f"{name} is a {typ} named like a counter")
shares = [float(v) for v in re.findall(
    r'^stepring_time_share_ratio\{pool="%s",[^}]*\} (\S+)$' % re.escape(sys.argv[2]), text, re.M)]
assert len(shares) == 5 and abs(sum(shares) - 1) < 1e-6, shares
EOF
if command -v promtool >/dev/null; then
	promtool check metrics <"$tmp/once.txt" >"$tmp/lint.txt" 2>&1 ||
		fail "promtool check metrics: $(cat "$tmp/lint.txt")"
fi
# OpenMetrics: counter families without _total, samples with it, # EOF last.
once "$N" --openmetrics >"$tmp/om.txt" || fail "--once --openmetrics"
grep -q '^# TYPE stepring_steps counter$' "$tmp/om.txt" || fail "openmetrics TYPE"
grep -q "^stepring_steps_total{pool=\"$N\"" "$tmp/om.txt" || fail "openmetrics sample"
[ "$(tail -n1 "$tmp/om.txt")" = "# EOF" ] || fail "openmetrics: no # EOF at the end"
! grep -q '^$' "$tmp/om.txt" || fail "openmetrics: an empty line"

# --- label escaping: a pool named with a quote and a backslash
"$SR" rollout --env CartPole-v1 --envs 8 --threads 1 --bind none --steps 1000000000000 \
	--seconds 300 --ring-name "$Q" >/dev/null 2>&1 &
qp=$!
pids+=("$qp")
poll 60 pool_seen "$Q" || fail "metrics does not see the pool $Q"
once "$Q" >"$tmp/q.txt"
grep -qF 'stepring_steps_total{pool="srtest-m\"q\\b-'"$$"'",' "$tmp/q.txt" ||
	fail "label not escaped: $(grep steps_total "$tmp/q.txt")"
if command -v promtool >/dev/null; then
	promtool check metrics <"$tmp/q.txt" >/dev/null 2>&1 || fail "promtool on escaped labels"
fi
kill -TERM "$qp"
wait "$qp" || fail "rollout $Q did not stop cleanly on SIGTERM"

# --- process workers: worker_kind="procs", and a worker killed is a fault
# and a restart in the counters
"$SR" rollout --env CartPole-v1 --envs 16 --threads 2 --procs --bind none \
	--steps 1000000000000 --seconds 300 --ring-name "$N-procs" >/dev/null 2>&1 &
pp=$!
pids+=("$pp")
poll 60 pool_seen "$N-procs" || fail "metrics does not see $N-procs"
once "$N-procs" >"$tmp/procs.txt"
grep -q "^stepring_workers{pool=\"$N-procs\",env=\"CartPole-v1\",worker_kind=\"procs\",mode=\"sync\"} 2$" "$tmp/procs.txt" ||
	fail "procs: $(grep stepring_workers "$tmp/procs.txt")"
# A worker: a child in the pool's process group (the guard has its own).
pg=$(ps -o pgid= -p "$pp" | tr -d ' ')
w=$(ps -o pid=,pgid= --ppid "$pp" | awk -v pg="$pg" '$2 == pg { print $1; exit }')
[ -n "$w" ] || fail "no worker process of $pp"
kill -KILL "$w"
restarted() {
	once "$N-procs" >"$tmp/procs.txt" &&
		grep -q "^stepring_faults_total{pool=\"$N-procs\".*} [1-9]" "$tmp/procs.txt" &&
		grep -q "^stepring_restarts_total{pool=\"$N-procs\".*} [1-9]" "$tmp/procs.txt"
}
poll 60 restarted || fail "a killed worker is not counted: $(grep -E 'faults|restarts' "$tmp/procs.txt")"
kill -TERM "$pp"
wait "$pp" || fail "the process pool did not stop cleanly"

# --- a version 1 block (the format before the time breakdown): read, and
# the version 2 families left out for it
$PY - "$N-v1" <<'EOF' &
import fcntl, os, struct, sys, time
name = sys.argv[1]
fd = os.open(f"/dev/shm/{name}.stats", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
blk = bytearray(8552)
struct.pack_into("<QIIQq", blk, 0, 0x5354415453525453, 1, 1, 0, os.getpid())
blk[32:32 + 11] = b"CartPole-v1"
struct.pack_into("<IIII", blk, 96, 4, 1, 4, 0)  # num_envs, num_threads, batch, mode
struct.pack_into("<QQQQQ", blk, 112, 1000, 2000000000, 12345, 100, 7)  # start, now, steps, batches, episodes
os.write(fd, bytes(blk))
fcntl.flock(fd, fcntl.LOCK_EX)  # "alive"
time.sleep(120)
EOF
v1=$!
pids+=("$v1")
poll 30 pool_seen "$N-v1" || fail "a version 1 block is not read"
once "$N-v1" >"$tmp/v1.txt"
grep -q "^stepring_steps_total{pool=\"$N-v1\".*} 12345$" "$tmp/v1.txt" || fail "v1 steps: $(cat "$tmp/v1.txt")"
! grep -q "stepring_time_seconds_total{pool=\"$N-v1\"" "$tmp/v1.txt" || fail "v1: version 2 families"
! grep -q "stepring_batch_latency_seconds_sum{pool=\"$N-v1\"" "$tmp/v1.txt" || fail "v1: latency sum"
kill "$v1"
wait "$v1" 2>/dev/null
rm -f "/dev/shm/$N-v1.stats"

# --- the HTTP server, the time series, the textfile
mkdir "$tmp/tf"
"$SR" metrics "$N" --listen 127.0.0.1:0 --interval 0.2 --out "$tmp/series.jsonl" \
	>"$tmp/srv.txt" 2>&1 &
srv=$!
pids+=("$srv")
poll 30 grep -q "serving http://127.0.0.1:[0-9]*/metrics" "$tmp/srv.txt" || fail "no address: $(cat "$tmp/srv.txt")"
port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/srv.txt")
"$SR" metrics "$N" --textfile "$tmp/tf" --interval 0.2 >"$tmp/tf.txt" 2>&1 &
tfp=$!
pids+=("$tfp")
cat >"$tmp/http.py" <<'EOF'
import socket, sys, time
port, pool = int(sys.argv[1]), sys.argv[2]

def req(data, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    return head.decode().split("\r\n"), body

def status(lines):
    return int(lines[0].split()[1])

# Idle connections first: a single-threaded server must still answer.
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
idle[0].sendall(b"GET /metr")  # half a request
h, body = req(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
assert status(h) == 200, h
assert "Content-Type: text/plain; version=0.0.4; charset=utf-8" in h, h
n = [l for l in h if l.startswith("Content-Length:")]
assert n and int(n[0].split()[1]) == len(body), (n, len(body))
assert f'stepring_steps_total{{pool="{pool}"'.encode() in body
assert b"stepring_steps_per_second{" in body and b"stepring_time_share_ratio{" in body
for s in idle:
    s.close()
h, body = req(b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,"
              b"text/plain;version=0.0.4;q=0.5\r\n\r\n")
assert status(h) == 200 and any("application/openmetrics-text" in l for l in h), h
assert body.endswith(b"# EOF\n")
h, body = req(b"HEAD /metrics HTTP/1.0\r\n\r\n")
assert status(h) == 200 and body == b"", (h, body[:50])
h, body = req(b"GET /metrics?x=1 HTTP/1.0\n\n")  # bare newlines, a query string
assert status(h) == 200, h
for data, want in [(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
                   (b"GET / HTTP/1.1\r\n\r\n", 404), (b"GET /metricsx HTTP/1.1\r\n\r\n", 404),
                   (b"garbage\r\n\r\n", 400), (b"GET /metrics\r\n\r\n", 400),
                   (b"GET  /metrics HTTP/1.1\r\n\r\n", 400), (b"G\x00T / HTTP/1.1\r\n\r\n", 400),
                   (b"GET /metrics HTTP/2.0\r\n\r\n", 505), (b"GET /" + b"a" * 9000, 431),
                   (b"\xff\xfe\r\n\r\n", 400)]:
    h, _ = req(data)
    assert status(h) == want, (data[:30], h)
    if want == 405:
        assert "Allow: GET, HEAD" in h, h
# Two requests on one connection: the first answered in full, then closed.
h, body = req(b"GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n")
assert status(h) == 200 and body.count(b"# HELP stepring_pools ") == 1
# A client that connects and goes away.
s = socket.create_connection(("127.0.0.1", port))
s.close()
h, _ = req(b"GET /metrics HTTP/1.1\r\n\r\n")
assert status(h) == 200
EOF
$PY "$tmp/http.py" "$port" "$N" || fail "HTTP checks"
poll 30 grep -q "^stepring_steps_total{pool=\"$N\"" "$tmp/tf/stepring.prom" || fail "textfile: $(cat "$tmp/tf.txt")"
if command -v promtool >/dev/null; then
	promtool check metrics <"$tmp/tf/stepring.prom" >/dev/null 2>&1 || fail "promtool on the textfile"
fi

# --- the Grafana dashboard: JSON, and every metric its queries name is one
# the exporter serves (node_exporter's where it is installed, for the node's
# OOM kills; it also reads our textfile there)
$PY - "$port" >"$tmp/scrape.txt" <<'EOF' || fail "scrape"
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode(), end="")
EOF
ne=$(command -v prometheus-node-exporter || command -v node_exporter || true)
: >"$tmp/node.txt"
if [ -n "$ne" ]; then
	neport=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$ne" --web.listen-address="127.0.0.1:$neport" --collector.disable-defaults \
		--collector.textfile --collector.textfile.directory="$tmp/tf" --collector.vmstat \
		>"$tmp/ne.log" 2>&1 &
	nep=$!
	pids+=("$nep")
	get_node() {
		$PY -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$neport/metrics', timeout=5).read().decode())" \
			>"$tmp/node.txt" 2>/dev/null && grep -q "^stepring_steps_total{" "$tmp/node.txt"
	}
	poll 30 get_node || fail "node_exporter does not serve the textfile: $(tail -3 "$tmp/ne.log")"
	kill "$nep"
fi
$PY - "$SRC/tools/grafana/stepring.json" "$tmp/scrape.txt" "$tmp/node.txt" <<'EOF' || fail "dashboard"
import json, re, sys
dash = json.load(open(sys.argv[1]))
served = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", open(sys.argv[2]).read(), re.M))
node = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", open(sys.argv[3]).read(), re.M))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
assert len(exprs) >= 10, len(exprs)
for e in exprs:
    names = re.findall(r"\b((?:stepring|node)_[a-zA-Z0-9_]+)\b", e)
    assert names, f"a query naming no metric: {e}"
    for n in names:
        if n.startswith("stepring_"):
            assert n in served, f"{n} (in {e!r}) is not served"
        elif node:
            assert n in node, f"{n} (in {e!r}) is not in node_exporter's output"
        else:
            assert n == "node_vmstat_oom_kill", n  # node_exporter's, not installed here
print(f"dashboard: {len(exprs)} queries, {len(served)} metric names served")
EOF

# --- stepring top --out: the same samples, and their plot
# One line per refresh in which the pool updated its block (a pool starved
# of CPU by a busy machine may skip one): 2 to 10 of 10.
"$SR" top "$N" --plain --interval 0.2 --count 10 --out "$tmp/top.jsonl" >/dev/null || fail "top --out"
lines=$(grep -c '"schema":"stepring.top/1"' "$tmp/top.jsonl")
[ "$lines" -ge 2 ] && [ "$lines" -le 10 ] && [ "$lines" = "$(wc -l <"$tmp/top.jsonl")" ] ||
	fail "top --out: $lines lines: $(head -2 "$tmp/top.jsonl")"
if $PY -c 'import matplotlib' 2>/dev/null; then
	$PY "$SRC/tools/plot_timeline.py" "$tmp/top.jsonl" -o "$tmp/top.png" >/dev/null || fail "plot_timeline"
	[ "$(head -c 4 "$tmp/top.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "not a PNG"
	$PY "$SRC/tools/plot_timeline.py" "$tmp/once.txt" -o "$tmp/x.png" >/dev/null 2>&1 &&
		fail "plot_timeline took a file that is no time series"
fi

# --- the pool ends: it disappears from the scrape and the textfile
kill -TERM "$roll"
wait "$roll" || fail "rollout did not stop cleanly on SIGTERM: $(cat "$tmp/roll.txt")"
grep -q "stopped by a signal" "$tmp/roll.txt" || fail "rollout: $(cat "$tmp/roll.txt")"
gone() {
	$PY - "$port" "$N" <<'EOF'
import sys, urllib.request
t = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
sys.exit(0 if "stepring_pools 0\n" in t and f'pool="{sys.argv[2]}"' not in t else 1)
EOF
}
poll 10 gone || fail "an ended pool is still served"
poll 10 grep -q "^stepring_pools 0$" "$tmp/tf/stepring.prom" || fail "an ended pool is still in the textfile"
[ "$(grep -c "\"pool\":\"$N\"" "$tmp/series.jsonl")" -ge 2 ] || fail "metrics --out: $(head -c 300 "$tmp/series.jsonl")"
kill -TERM "$tfp"
wait "$tfp" || fail "metrics --textfile did not stop cleanly"
[ ! -e "$tmp/tf/stepring.prom" ] || fail "the textfile outlives the exporter"
kill -TERM "$srv"
wait "$srv" || fail "metrics --listen did not stop cleanly"

# --- a stale segment (its pool killed): never reported as live
"$SR" rollout --env CartPole-v1 --envs 8 --threads 1 --bind none --steps 1000000000000 \
	--seconds 300 --ring-name "$N-stale" >/dev/null 2>&1 &
sp=$!
pids+=("$sp")
poll 60 pool_seen "$N-stale" || fail "metrics does not see $N-stale"
kill -KILL "$sp"
wait "$sp" 2>/dev/null
[ -e "/dev/shm/$N-stale.stats" ] || fail "no stale segment left to test with"
expect_rc 0 "$SR" metrics "$N-stale" --once
grep -q '^stepring_pools 0$' <<<"$out" || fail "a stale segment is reported: $out"
expect_rc 0 "$SR" metrics --once
! grep -q "$N-stale" <<<"$out" || fail "a stale segment is reported without a name"
"$SR" ring rm --stale "$N-stale" >/dev/null
echo "ok"
