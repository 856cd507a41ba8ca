#!/usr/bin/env bash
# CLI checks of the MuJoCo envs: envs lists them (float64); envcheck replays
# the committed reference episodes (and a changed copy fails at that row);
# envstats --paired meets the MuJoCo kit's statistics episode for episode
# (when ../shared/mujoco is there); bench env prints the mj_step ceiling;
# bad parameters exit 2. Pools: the rollout hash of a MuJoCo env is the same
# for 1, 2 and 3 threads, sync and async, thread and process workers, and
# MPI ranks. While the pool refuses float64 observations ("not supported by
# the pool yet") those checks are reported as skipped; they run as soon as
# it takes them. Skipped (77) in a build without MuJoCo.
# usage: cli_mujoco.sh STEPRING REFDATA_DIR KIT_DIR mpi|nompi
set -u
SR=$1
REF=$2
KIT=$3
MPI=${4:-nompi}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$SR" envs | grep -q '^Hopper-v5 ' || { echo "built without MuJoCo: skipped"; exit 77; }

# ---- envs, envcheck ---------------------------------------------------------
out=$("$SR" envs)
[ "$(grep -c ' float64 unbounded$' <<<"$out")" -eq 22 ] || fail "envs: 22 float64 MuJoCo lines: $out"
grep -q '^Humanoid-v5 *humanoid *(348,) *Box(-0.4,0.4,(17,)) *1000  float64 unbounded$' <<<"$out" ||
	fail "envs: Humanoid line"
"$SR" envs --json | grep -q '"id":"Reacher-v5",.*"obs_dtype":"float64".*"max_episode_steps":50' ||
	fail "envs --json: Reacher"

while read -r file limit env; do
	out=$("$SR" envcheck --env "$env" --csv "$REF/$file" --time-limit "$limit") ||
		fail "envcheck $env: $out"
	grep -Eq 'obs_differ=0/[0-9]+ .* rew_differ=0 .* info_differ=0/[0-9]+ .* flag_mismatches=0 reset_state_differ=0$' \
		<<<"$out" || fail "envcheck $env: $out"
done <"$REF/params.txt"
# One action changed in row 5 (episode 0, t=4): the replay fails there.
f=$(awk '$1 ~ /^Swimmer-v5/ { print $1 }' "$REF/params.txt")
e=$(awk '$1 ~ /^Swimmer-v5/ { print $3 }' "$REF/params.txt")
zcat "$REF/$f" | awk -F, -v OFS=, 'NR == 6 { $14 = $14 * 0.5 } 1' >"$TMP/bad.csv"
"$SR" envcheck --env "$e" --csv "$TMP/bad.csv" --time-limit 25 >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "a changed action is not found: $(cat "$TMP/out" "$TMP/err")"
grep -q "first mismatch at line 6 (episode 0, t=4)" "$TMP/err" || fail "mismatch line: $(cat "$TMP/err")"
# The wrong env for a file, a missing file: exit 2.
"$SR" envcheck --env Hopper-v5 --csv "$REF/$f" >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "does not fit env 'Hopper-v5'" "$TMP/err" || fail "wrong env: $(cat "$TMP/err")"
"$SR" envcheck --env Hopper-v5 --csv "$TMP/none.csv.gz" >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing file"
"$SR" envcheck --env Hopper-v5 --csv "$REF/$f" --mode rollout >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "not seeded or state" "$TMP/err" || fail "bad mode: $(cat "$TMP/err")"

# ---- parameters -------------------------------------------------------------
bad() { # bad TEXT ENV: exit 2 with one line naming TEXT
	"$SR" bench env --env "$2" --seconds 0.01 --repeat 1 >"$TMP/o" 2>"$TMP/e"
	local rc=$?
	[ $rc -eq 2 ] || fail "bench env --env $2: exit $rc, want 2"
	[ "$(wc -l <"$TMP/e")" -eq 1 ] && grep -qF -- "$1" "$TMP/e" ||
		fail "--env $2: '$(cat "$TMP/e")' lacks '$1'"
}
bad "unknown parameter 'frob' (it takes" "Hopper-v5:frob=1"
bad "frame_skip='0' must be an integer in [1, 255]" "Hopper-v5:frame_skip=0"
bad "is not a bundled model" "Ant-v5:xml_file=../ant.xml"
bad "low 2 is above high 1" "Walker2d-v5:healthy_z_range=2:1"

# ---- bench env: the physics ceiling --------------------------------------------
out=$("$SR" bench env --env InvertedPendulum-v5 --env Reacher-v4 --seconds 0.05 --repeat 1 --table) ||
	fail "bench env table: $out"
grep -Eq '^\| InvertedPendulum-v5 \| 16 \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \|$' \
	<<<"$out" || fail "bench env table row: $out"
"$SR" bench env --env Hopper-v5 --seconds 0.05 --repeat 1 --json | grep -q '"physics_ns":[0-9.]*,"physics_steps_per_cpu_sec":[0-9]*,"vs_physics":' ||
	fail "bench env json: physics fields"

# ---- envstats --paired against the kit's statistics -----------------------------
if [ -f "$KIT/stats/random_policy.csv" ]; then
	for pol in random zero; do
		out=$("$SR" envstats --env InvertedDoublePendulum-v5 --policy $pol --paired --seed 1 \
			--episodes 200 --ref "$KIT/stats/${pol}_policy.csv") || fail "envstats $pol: $out"
		grep -q 'identical (length and return to the bit) 100.0%' <<<"$out" ||
			fail "envstats --paired $pol: $out"
	done
else
	echo "no MuJoCo reference kit at $KIT: envstats against its statistics skipped"
fi

# ---- pools (when they take float64 observations) ---------------------------------
R="rollout --env Hopper-v5 --envs 7 --seed 3 --steps 60 --hash"
if h1=$("$SR" $R --threads 1 2>"$TMP/err"); then
	for args in "--threads 2" "--threads 3 --synthetic core:4" "--threads 2 --mode async --batch 3" \
		"--procs --threads 2" "--procs --proc-inline --threads 2"; do
		h=$("$SR" $R $args) || fail "rollout $args"
		[ "$h" = "$h1" ] || fail "rollout $args: $h, 1 thread $h1"
	done
	h=$("$SR" rollout --env Hopper-v5:ctrl_cost_weight=0.5 --envs 7 --seed 3 --steps 60 --hash \
		--procs --threads 2) || fail "rollout with a parameter in worker processes"
	[ "$h" != "$h1" ] || fail "a parameter changes nothing in worker processes"
	if [ "$MPI" = mpi ] && command -v mpirun >/dev/null 2>&1; then
		. "$(dirname "$0")/mpi_env.sh"
		for n in 2 3; do
			h=$($MPIRUN -np $n "$SR" $R 2>/dev/null) || fail "mpirun -np $n"
			[ "$h" = "$h1" ] || fail "$n ranks: $h, 1 process $h1"
		done
	fi
elif grep -q "not supported by the pool yet" "$TMP/err"; then
	echo "SKIPPED (the pool refuses float64 observations: $(cat "$TMP/err")): pool rollouts"
else
	fail "rollout: $(cat "$TMP/err")"
fi
echo "OK"
