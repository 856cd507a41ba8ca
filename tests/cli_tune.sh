#!/usr/bin/env bash
# Golden-output tests of the tuning commands (sweep, diagnose, top, plots).
#   cli_tune.sh STEPRING GOLDEN_DIR SOURCE_DIR
# Figures change from run to run, so outputs are compared after masking:
# every number becomes '#', the bound column 'BOUND', runs of blanks one
# blank. JSONL lines are compared by their key paths and value types.
# UPDATE=1 rewrites the golden files instead of comparing.
set -u
S=$1
GOLDEN=$2
SRC=$3
PY=/usr/bin/python3
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
tmp=$T

# Bad arguments: exit 2, one line on stderr starting "stepring: ", no stdout.
bad() {
	expect_usage_error "$S" "$@" && ok "stepring $* -> $(cat "$T/err")"
}

bad sweep --envs 0
bad sweep --envs 1,x
bad sweep --envs ''
bad sweep --threads -1
bad sweep --batch 0
bad sweep --mode fast
bad sweep --mode sync,
bad sweep --policy mlp:0x2
bad sweep --policy transformer
bad sweep --device tpu
bad sweep --bind everywhere
bad sweep --env NoSuchEnv-v0
bad sweep --seconds -1
bad sweep --seconds abc
bad sweep --max-envs 0
bad sweep --out /nonexistent-dir/x.jsonl
bad sweep --frobnicate
bad sweep --envs
if ! "$S" version | grep -q cuda; then
	bad sweep --device cuda
	bad diagnose --device cuda
fi
bad diagnose --env NoSuchEnv-v0
bad diagnose --env CartPole-v1 --env Bogus-v9
bad diagnose --policy none
bad diagnose --policy mlp:8
bad diagnose --mode async --envs 4 --batch 4
bad diagnose --mode async --envs 1
bad diagnose --mode turbo
bad diagnose --envs 0
bad diagnose --frob
bad diagnose --procs --mode async --envs 8
bad top --interval 0
bad top --count x
bad top --bogus

for c in sweep diagnose top; do
	expect_rc 0 "stepring $c --help" "$S" "$c" --help &&
		expect_line "stepring $c --help: usage" "^usage: stepring $c" "$T/out"
done

mask() { # numbers -> '#', bound column -> BOUND, blanks squeezed
	sed -E -e 's/[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?/#/g' \
		-e 's/ (env|policy|copy|sync)$/ BOUND/' -e 's/ +/ /g' -e 's/ $//'
}

# --- sweep: the table and the JSONL ---------------------------------------
expect_rc 0 "sweep" "$S" sweep --env CartPole-v1 --envs 2,4 --threads 1 --mode sync,async \
	--seconds 0.05 --warmup 0.02 --cooldown 0 --bind none --no-progress --out "$tmp/s.jsonl"
cp "$T/out" "$tmp/table"
sed -e "s|$tmp|TMP|g" "$tmp/table" | mask >"$tmp/table.masked"
expect_golden sweep_table.golden "$tmp/table.masked"
expect_lines "sweep: JSON lines" 4 "$tmp/s.jsonl"

# Key paths and value types of every line (the same for all of them).
$PY - "$tmp/s.jsonl" >"$tmp/keys" <<'EOF' || fail "JSONL is not valid JSON"
import json, sys

def walk(v, path, out):
    if isinstance(v, dict):
        for k in v:
            walk(v[k], f"{path}.{k}" if path else k, out)
    elif isinstance(v, list):
        out.append(f"{path}: list")
        for x in v:
            walk(x, path + "[]", out)
    else:
        t = {bool: "bool", int: "number", float: "number", str: "string"}.get(type(v), "null")
        out.append(f"{path}: {t}")

shapes = set()
for line in open(sys.argv[1]):
    d = json.loads(line)
    out = []
    walk(d, "", out)
    # backends vary with the build: keep one entry
    shapes.add("\n".join(dict.fromkeys(out)))
    c, r = d["config"], d["result"]
    assert d["schema"] == "stepring.sweep/1"
    assert c["env"] == "CartPole-v1" and c["threads"] == 1 and c["num_envs"] in (2, 4)
    assert c["batch"] == (c["num_envs"] if c["mode"] == "sync" else c["num_envs"] // 2)
    assert r["steps_per_sec"] > 0 and r["p50_us"] <= r["p90_us"] <= r["p99_us"]
    assert r["bound"] in ("env", "policy", "copy", "sync")
    assert abs(sum(r["shares"].values()) - 1) < 0.2, r["shares"]
    assert "--envs %d " % c["num_envs"] in d["command"]
    assert "host" in d["build"]["backends"]
assert len(shapes) == 1, "JSON lines differ in shape"
print(shapes.pop())
EOF
expect_golden sweep_jsonl_keys.golden "$tmp/keys"

# --- plot ---------------------------------------------------------------------
if expect_rc 0 "plot_sweep.py" $PY "$SRC/tools/plot_sweep.py" "$tmp/s.jsonl" -o "$tmp/s.png"; then
	expect_eq "plot_sweep.py: PNG signature" 89504e470d0a1a0a \
		"$(head -c 8 "$tmp/s.png" | od -An -tx1 | tr -d ' \n')"
	expect_num "plot_sweep.py: PNG bytes" "$(stat -c %s "$tmp/s.png")" ">" 20000
fi
echo '{"not": "a sweep line"}' >"$tmp/bad.jsonl"
expect_rc 1 "plot_sweep.py refuses a non-sweep file" \
	$PY "$SRC/tools/plot_sweep.py" "$tmp/bad.jsonl" -o "$tmp/bad.png" && cat "$T/err"

# --- diagnose: structure of the report ----------------------------------------
expect_rc 0 "diagnose" "$S" diagnose --env CartPole-v1 --envs 8 --threads 1 --policy mlp:16x1 \
	--seconds 0.05
cp "$T/out" "$tmp/diag"
# The table and the verdict line are golden; the reasons and advice that
# follow depend on the verdict: each starts "  because" or "  try".
grep -v '^  \(because\|try\) \|^(' "$tmp/diag" | mask |
	sed -E -e 's/^verdict: (env-bound|policy\/GPU-bound|copy-bound|sync-bound)$/verdict: VERDICT/' \
		-e 's/^(policy only \(# rows\)) .*/\1 .../' >"$tmp/diag.masked"
expect_golden diagnose.golden "$tmp/diag.masked"
expect_line "diagnose gives reasons" '^  because ' "$tmp/diag"
expect_line "diagnose gives advice" '^  try ' "$tmp/diag"
expect_line "diagnose: the verdict line" \
	'^verdict: \(env-bound\|policy/GPU-bound\|copy-bound\|sync-bound\)$' "$tmp/diag"

# --- diagnose --procs: the worker processes' faults ------------------------
expect_rc 0 "diagnose --procs" "$S" diagnose --env CartPole-v1 --envs 8 --threads 2 \
	--policy mlp:16x1 --seconds 0.05 --procs
cp "$T/out" "$tmp/diagp"
expect_line "diagnose --procs: the worker processes section" \
	'^worker processes (every worker a process):$' "$tmp/diagp"
expect_line "diagnose --procs: fault counts" '^  closed loop  faults 0   restarts 0   fault rows 0$' \
	"$tmp/diagp"
expect_no_line "diagnose --procs ran sync" '^closed loop (async)' "$tmp/diagp"

finish
