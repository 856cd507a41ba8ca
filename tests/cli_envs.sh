#!/usr/bin/env bash
# CLI tests of `stepring envs`, `stepring envcheck` and `stepring bench env`.
# usage: cli_envs.sh STEPRING REFDATA_DIR [PLUGIN.so]
set -u
SR=$1
REF=$2
PLUGIN=${3:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# expect RC DESCRIPTION -- CMD...: run, keep stdout/stderr in $TMP/out,err
expect() {
	local want=$1 what=$2
	shift 3
	"$@" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "$what: exit $rc, expected $want"
		sed 's/^/  stdout: /' "$TMP/out" | head -5
		sed 's/^/  stderr: /' "$TMP/err" | head -5
		return 1
	fi
	echo "ok: $what (exit $rc)"
	return 0
}

# A usage error is exactly one line on stderr, starting with "stepring:".
one_error_line() {
	local n
	n=$(wc -l <"$TMP/err")
	[ "$n" -eq 1 ] && grep -q '^stepring: ' "$TMP/err" || fail "$1: expected one error line, got: $(cat "$TMP/err")"
	[ -z "$2" ] || grep -q -- "$2" "$TMP/err" || fail "$1: error does not mention '$2': $(cat "$TMP/err")"
}

LINE_RE='^rows=[0-9]+ max_obs_err=[^ ]+ max_rew_err=[^ ]+ flag_mismatches=[0-9]+$'

# ---- envs -------------------------------------------------------------------
expect 0 "envs" -- "$SR" envs
for id in CartPole-v1 Pendulum-v1 MountainCar-v0 MountainCarContinuous-v0 Acrobot-v1 Spin-v0; do
	grep -q "^$id " "$TMP/out" || fail "envs does not list $id"
done
grep -q '^CartPole-v1 *cartpole *(4,) *Discrete(2) *500 *\[-4.8,4.8\] \[-inf,inf\]' "$TMP/out" ||
	fail "envs: CartPole line: $(grep CartPole "$TMP/out")"
grep -q '^Pendulum-v1 .*Box(-2,2,(1,)) *200' "$TMP/out" || fail "envs: Pendulum line"
expect 0 "envs --json" -- "$SR" envs --json
n_envs=6 # and the 3 Box2D envs when built with Box2D, the 22 MuJoCo envs with MuJoCo
"$SR" envs | grep -q '^LunarLander-v3 ' && n_envs=$((n_envs + 3))
"$SR" envs | grep -q '^Hopper-v5 ' && n_envs=$((n_envs + 22))
[ "$(wc -l <"$TMP/out")" -eq $n_envs ] || fail "envs --json: expected $n_envs lines"
grep -q '"id":"Acrobot-v1".*"max_episode_steps":500' "$TMP/out" || fail "envs --json: Acrobot"
expect 0 "envs --help" -- "$SR" envs --help
expect 2 "envs bad option" -- "$SR" envs --bogus && one_error_line "envs --bogus" "unknown option"

# ---- envcheck on the reference files -----------------------------------------
for f in "$REF"/CartPole-v1.csv "$REF"/Pendulum-v1.csv "$REF"/MountainCar-v0.csv \
	"$REF"/MountainCarContinuous-v0.csv "$REF"/Acrobot-v1.csv; do
	id=$(basename "$f" .csv)
	if expect 0 "envcheck $id" -- "$SR" envcheck --env "$id" --csv "$f"; then
		[ "$(wc -l <"$TMP/out")" -eq 1 ] && grep -Eq "$LINE_RE" "$TMP/out" ||
			fail "envcheck $id: output is not the one result line: $(cat "$TMP/out")"
		rows=$(($(wc -l <"$f") - 1))
		grep -q "^rows=$rows " "$TMP/out" || fail "envcheck $id: rows != $rows"
	fi
done
expect 0 "envcheck --mode rollout by short name" -- \
	"$SR" envcheck --env acrobot --csv "$REF/Acrobot-v1.csv" --mode rollout

# ---- envcheck on CSVs made here ------------------------------------------------
# A subset of CartPole's episodes (3, 7, 12, 16: terminations and a 500-step
# truncation), renumbered 0..3.
awk -F, 'NR == 1 { print; next }
	$1 == 3 || $1 == 7 || $1 == 12 || $1 == 16 {
		if ($1 != last) { ep++; last = $1 }
		$1 = ep - 1; print }' OFS=, "$REF/CartPole-v1.csv" >"$TMP/sub.csv"
subrows=$(($(wc -l <"$TMP/sub.csv") - 1))
[ "$subrows" -gt 100 ] || fail "subset has only $subrows rows"
[ "$(cut -d, -f1 "$TMP/sub.csv" | sort -u | wc -l)" -eq 5 ] || fail "subset: expected 4 episodes + header"
expect 0 "envcheck subset ($subrows rows)" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/sub.csv" &&
	grep -q "^rows=$subrows max_obs_err=0 max_rew_err=0 flag_mismatches=0$" "$TMP/out" ||
	fail "subset line: $(cat "$TMP/out")"

# The same data with its columns in another order (reward last, flags swapped).
awk -F, '{ print $1","$2","$3","$4","$5","$6","$7","$8","$9","$10","$11","$14","$13","$12 }' \
	"$TMP/sub.csv" >"$TMP/reorder.csv"
expect 0 "envcheck reordered columns" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/reorder.csv"

# One obs value changed by 1e-3 (row 10 of the subset, obs_x_dot): exit 1.
awk -F, 'NR == 11 { $9 = $9 + 0.001 } { print }' OFS=, "$TMP/sub.csv" >"$TMP/obs.csv"
if expect 1 "envcheck one obs changed" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/obs.csv"; then
	grep -Eq "$LINE_RE" "$TMP/out" || fail "obs changed: no result line"
	grep -q "max_obs_err=0 " "$TMP/out" && fail "obs changed: max_obs_err is 0"
	grep -q "line 11 " "$TMP/err" || fail "obs changed: the mismatch line is not named: $(cat "$TMP/err")"
fi
# A flag flipped on the last row of the first episode: exit 1, flags counted.
last=$(awk -F, 'NR > 1 && $1 == 0 { n = NR } END { print n }' "$TMP/sub.csv")
awk -F, -v n="$last" 'NR == n { $13 = 1 - $13 } { print }' OFS=, "$TMP/sub.csv" >"$TMP/flag.csv"
expect 1 "envcheck terminated flipped" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/flag.csv" &&
	{ grep -q "flag_mismatches=0$" "$TMP/out" && fail "flag flipped: no mismatch counted"; }
# A reward off by 1e-6 relative: exit 1.
awk -F, 'NR == 20 { $12 = "1.000001" } { print }' OFS=, "$TMP/sub.csv" >"$TMP/rew.csv"
expect 1 "envcheck reward changed" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/rew.csv"

# Malformed or unfitting input: one error line, exit 2.
head -c 3000 "$TMP/sub.csv" >"$TMP/trunc.csv" # cut in the middle of a line
expect 2 "envcheck truncated file" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/trunc.csv" &&
	one_error_line "truncated" "fields"
awk -F, 'NR == 25 { $12 = "abc" } { print }' OFS=, "$TMP/sub.csv" >"$TMP/junk.csv"
expect 2 "envcheck junk reward" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/junk.csv" &&
	one_error_line "junk" "bad reward 'abc'"
sed '40d' "$TMP/sub.csv" >"$TMP/gap.csv"
expect 2 "envcheck missing row" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/gap.csv" &&
	one_error_line "gap" "does not follow"
: >"$TMP/empty.csv"
expect 2 "envcheck empty file" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/empty.csv" &&
	one_error_line "empty" "empty"
head -1 "$TMP/sub.csv" >"$TMP/header.csv"
expect 2 "envcheck header only" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/header.csv" &&
	one_error_line "header only" "no data rows"
expect 2 "envcheck CSV of another env" -- \
	"$SR" envcheck --env CartPole-v1 --csv "$REF/MountainCar-v0.csv" &&
	one_error_line "other env" "do not fit"
expect 2 "envcheck not a reference CSV" -- \
	"$SR" envcheck --env CartPole-v1 --csv "$REF/episodes.csv" && one_error_line "episodes.csv" "not a reference CSV"
expect 2 "envcheck missing file" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/nope.csv" &&
	one_error_line "missing file" "cannot open"
expect 2 "envcheck no --csv" -- "$SR" envcheck --env CartPole-v1 && one_error_line "no --csv" "required"
expect 2 "envcheck unknown env" -- "$SR" envcheck --env Foo-v9 --csv "$TMP/sub.csv" &&
	one_error_line "unknown env" "known: CartPole-v1"
expect 2 "envcheck spin" -- "$SR" envcheck --env spin --csv "$TMP/sub.csv" && one_error_line "spin" "no physical state"
expect 2 "envcheck bad mode" -- "$SR" envcheck --env CartPole-v1 --csv "$TMP/sub.csv" --mode fast &&
	one_error_line "bad mode" "--mode"
expect 0 "envcheck --help" -- "$SR" envcheck --help

# ---- a plugin: listed by envs, checked by envcheck against a CSV made here ---
if [ -n "$PLUGIN" ]; then
	expect 0 "envs --plugin" -- "$SR" envs --plugin "$PLUGIN" &&
		{ grep -q '^Corridor-v0 *corridor *(1,) *Discrete(2) *100' "$TMP/out" || fail "envs --plugin: no Corridor line"; }
	# A corridor's episodes (state column pos; reward -0.01 per step, +1 at cell 9).
	printf '%s\n' 'episode,t,pos,action,obs_pos,reward,terminated,truncated' \
		'0,0,3,-1,3,0,0,0' '0,1,3,1,4,-0.01,0,0' '0,2,4,0,3,-0.01,0,0' '0,3,3,1,4,-0.01,0,0' \
		'1,0,8,-1,8,0,0,0' '1,1,8,1,9,1,1,0' >"$TMP/corridor.csv"
	expect 0 "envcheck --plugin" -- "$SR" envcheck --plugin "$PLUGIN" --csv "$TMP/corridor.csv" &&
		{ grep -q '^rows=6 max_obs_err=0 ' "$TMP/out" || fail "envcheck --plugin: $(cat "$TMP/out")"; }
	sed 's/^1,1,8,1,9,1,1,0$/1,1,8,0,9,1,1,0/' "$TMP/corridor.csv" >"$TMP/corridor_bad.csv"
	expect 1 "envcheck --plugin, wrong action" -- "$SR" envcheck --plugin "$PLUGIN" --csv "$TMP/corridor_bad.csv"
	expect 2 "envcheck --plugin and --env" -- "$SR" envcheck --plugin "$PLUGIN" --env cartpole \
		--csv "$TMP/corridor.csv" && one_error_line "both" "one of --env or --plugin"
	expect 2 "envs --plugin missing" -- "$SR" envs --plugin "$TMP/none.so" && one_error_line "missing plugin" "cannot load"
fi

# ---- bench ------------------------------------------------------------------
expect 2 "bench without WHAT" -- "$SR" bench && one_error_line "bench" "available: .*env"
expect 0 "bench --help" -- "$SR" bench --help && { grep -q '^  env ' "$TMP/out" || fail "bench --help lacks env"; }
expect 2 "bench unknown" -- "$SR" bench nope && one_error_line "bench nope" "unknown benchmark 'nope'"
expect 0 "bench env --help" -- "$SR" bench env --help
expect 2 "bench env no --env" -- "$SR" bench env && one_error_line "bench env" "--env"
expect 2 "bench env --n 0" -- "$SR" bench env --env cartpole --n 0 && one_error_line "--n 0" "out of range"
expect 2 "bench env bad spin" -- "$SR" bench env --env spin:cost=3 && one_error_line "bad spin" "unknown parameter"
for e in CartPole-v1 pendulum spin:obs_dim=4,ep_len=5; do
	if expect 0 "bench env $e --json" -- "$SR" bench env --env "$e" --n 16 --seconds 0.02 --repeat 1 --json; then
		for k in '"env":' '"n_instances":16' '"steps_per_sec":' '"ns_per_step":'; do
			grep -q "$k" "$TMP/out" || fail "bench env json lacks $k"
		done
	fi
done

if [ "$fails" -ne 0 ]; then
	echo "$fails failure(s)"
	exit 1
fi
echo "all CLI env tests passed"
