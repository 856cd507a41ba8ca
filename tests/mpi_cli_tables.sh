#!/usr/bin/env bash
# sweep and diagnose under mpirun (2 and 3 ranks): one table at rank 0, a
# JSON line per rank and configuration and a total line whose steps/s is
# the ranks' sum, each rank in its own block of CPUs.
set -u
SR=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
# shellcheck source=mpi_env.sh
. "$(dirname "$0")/mpi_env.sh"
command -v /usr/bin/python3 >/dev/null || skip "no /usr/bin/python3"
D=$T
check() { # FILE RANKS RUNS KEY: per-rank lines, totals equal to their sums
	/usr/bin/python3 - "$@" <<'PY'
import json, sys
path, ranks, runs, key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open(path) if l.strip()]
per = [r for r in rows if r.get("row") == "rank"]
tot = [r for r in rows if r.get("row") == "total"]
assert len(per) == ranks * runs and len(tot) == runs, (len(per), len(tot))
def sps(r):
    return r["result"]["steps_per_sec"] if key == "result" else r[key]["steps_per_sec"]
for i, t in enumerate(tot):
    group = per[i * ranks:(i + 1) * ranks]
    assert [g["rank"] for g in group] == list(range(ranks)), [g["rank"] for g in group]
    assert all(g["ranks"] == ranks and sps(g) > 0 for g in group)
    s = sum(sps(g) for g in group)
    assert abs(s - sps(t)) <= 1 + 1e-6 * s, (s, sps(t))
print("ok")
PY
}
for np in 2 3; do
	out=$($MPIRUN -np $np "$SR" sweep --envs 32,64 --seconds 0.1 --warmup 0.05 --cooldown 0 \
		--no-progress --out "$D/sweep$np.jsonl" 2>&1) || fail "sweep -np $np: $out"
	grep '^num_envs threads' <<<"$out" | expect_lines "sweep -np $np: one table header" 1
	grep '^ *[0-9]\+ \+[0-9]\+ \+[0-9]\+ \+sync' <<<"$out" | expect_lines "sweep -np $np: 2 rows" 2
	expect_line "sweep -np $np: the ranks line" "^$np ranks, each running" <<<"$out"
	r=$(check "$D/sweep$np.jsonl" $np 2 result) || fail "sweep -np $np JSON: $r"
	out=$($MPIRUN -np $np "$SR" diagnose --envs 32 --seconds 0.1 --out "$D/diag$np.jsonl" 2>&1) ||
		fail "diagnose -np $np: $out"
	grep '^run  ' <<<"$out" | expect_lines "diagnose -np $np: one table" 1
	grep '^verdict:' <<<"$out" | expect_lines "diagnose -np $np: one verdict" 1
	for k in $(seq 0 $((np - 1))); do
		expect_line -E "diagnose -np $np: a row for rank $k" "^$k +[0-9,-]+ +[0-9]+ +[0-9]+ " <<<"$out"
	done
	r=$(check "$D/diag$np.jsonl" $np 1 closed_loop) || fail "diagnose -np $np JSON: $r"
	echo "-np $np: sweep and diagnose: one table, $np rank rows and a total per run"
done
finish
