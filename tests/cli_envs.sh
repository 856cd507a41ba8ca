#!/usr/bin/env bash
# CLI tests of `stepring envs`, `stepring envcheck` and `stepring bench env`.
# usage: cli_envs.sh STEPRING REFDATA_DIR [PLUGIN.so]
set -u
SR=$1
REF=$2
PLUGIN=${3:-}
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

LINE_RE='^rows=[0-9]+ max_obs_err=[^ ]+ max_rew_err=[^ ]+ flag_mismatches=[0-9]+$'

# ---- envs -------------------------------------------------------------------
expect_rc 0 "envs" -- "$SR" envs
for id in CartPole-v1 Pendulum-v1 MountainCar-v0 MountainCarContinuous-v0 Acrobot-v1 Spin-v0; do
	expect_line "envs lists $id" "^$id " "$T/out"
done
expect_line "envs: CartPole line" \
	'^CartPole-v1 *cartpole *(4,) *Discrete(2) *500 *\[-4.8,4.8\] \[-inf,inf\]' "$T/out"
expect_line "envs: Pendulum line" '^Pendulum-v1 .*Box(-2,2,(1,)) *200' "$T/out"
expect_rc 0 "envs --json" -- "$SR" envs --json
n_envs=6 # and the 3 Box2D envs when built with Box2D, the 22 MuJoCo envs with MuJoCo
"$SR" envs | grep -q '^LunarLander-v3 ' && n_envs=$((n_envs + 3))
"$SR" envs | grep -q '^Hopper-v5 ' && n_envs=$((n_envs + 22))
expect_lines "envs --json: a line per env" $n_envs "$T/out"
expect_line "envs --json: Acrobot" '"id":"Acrobot-v1".*"max_episode_steps":500' "$T/out"
expect_rc 0 "envs --help" -- "$SR" envs --help
expect_rc 2 "envs bad option" -- "$SR" envs --bogus && expect_one_error "envs --bogus" "unknown option"

# ---- envcheck on the reference files -----------------------------------------
for f in "$REF"/CartPole-v1.csv "$REF"/Pendulum-v1.csv "$REF"/MountainCar-v0.csv \
	"$REF"/MountainCarContinuous-v0.csv "$REF"/Acrobot-v1.csv; do
	id=$(basename "$f" .csv)
	if expect_rc 0 "envcheck $id" -- "$SR" envcheck --env "$id" --csv "$f"; then
		expect_lines "envcheck $id: one result line" 1 "$T/out"
		expect_line -E "envcheck $id: the result line" "$LINE_RE" "$T/out"
		rows=$(($(wc -l <"$f") - 1))
		expect_line "envcheck $id: rows" "^rows=$rows " "$T/out"
	fi
done
expect_rc 0 "envcheck --mode rollout by short name" -- \
	"$SR" envcheck --env acrobot --csv "$REF/Acrobot-v1.csv" --mode rollout

# ---- envcheck on CSVs made here ------------------------------------------------
# A subset of CartPole's episodes (3, 7, 12, 16: terminations and a 500-step
# truncation), renumbered 0..3.
awk -F, 'NR == 1 { print; next }
	$1 == 3 || $1 == 7 || $1 == 12 || $1 == 16 {
		if ($1 != last) { ep++; last = $1 }
		$1 = ep - 1; print }' OFS=, "$REF/CartPole-v1.csv" >"$T/sub.csv"
subrows=$(($(wc -l <"$T/sub.csv") - 1))
expect_num "subset rows" "$subrows" ">" 100
expect_eq "subset: 4 episodes + header" 5 "$(cut -d, -f1 "$T/sub.csv" | sort -u | wc -l)"
expect_rc 0 "envcheck subset ($subrows rows)" -- "$SR" envcheck --env CartPole-v1 --csv "$T/sub.csv"
expect_line "subset line" "^rows=$subrows max_obs_err=0 max_rew_err=0 flag_mismatches=0$" "$T/out"

# The same data with its columns in another order (reward last, flags swapped).
awk -F, '{ print $1","$2","$3","$4","$5","$6","$7","$8","$9","$10","$11","$14","$13","$12 }' \
	"$T/sub.csv" >"$T/reorder.csv"
expect_rc 0 "envcheck reordered columns" -- "$SR" envcheck --env CartPole-v1 --csv "$T/reorder.csv"

# One obs value changed by 1e-3 (row 10 of the subset, obs_x_dot): exit 1.
awk -F, 'NR == 11 { $9 = $9 + 0.001 } { print }' OFS=, "$T/sub.csv" >"$T/obs.csv"
if expect_rc 1 "envcheck one obs changed" -- "$SR" envcheck --env CartPole-v1 --csv "$T/obs.csv"; then
	expect_line -E "obs changed: the result line" "$LINE_RE" "$T/out"
	expect_no_line "obs changed: max_obs_err is not 0" "max_obs_err=0 " "$T/out"
	expect_line "obs changed: the mismatch line is named" "line 11 " "$T/err"
fi
# A flag flipped on the last row of the first episode: exit 1, flags counted.
last=$(awk -F, 'NR > 1 && $1 == 0 { n = NR } END { print n }' "$T/sub.csv")
awk -F, -v n="$last" 'NR == n { $13 = 1 - $13 } { print }' OFS=, "$T/sub.csv" >"$T/flag.csv"
expect_rc 1 "envcheck terminated flipped" -- "$SR" envcheck --env CartPole-v1 --csv "$T/flag.csv" &&
	expect_no_line "flag flipped: a mismatch counted" "flag_mismatches=0$" "$T/out"
# A reward off by 1e-6 relative: exit 1.
awk -F, 'NR == 20 { $12 = "1.000001" } { print }' OFS=, "$T/sub.csv" >"$T/rew.csv"
expect_rc 1 "envcheck reward changed" -- "$SR" envcheck --env CartPole-v1 --csv "$T/rew.csv"

# Malformed or unfitting input: one error line, exit 2.
head -c 3000 "$T/sub.csv" >"$T/trunc.csv" # cut in the middle of a line
expect_rc 2 "envcheck truncated file" -- "$SR" envcheck --env CartPole-v1 --csv "$T/trunc.csv" &&
	expect_one_error "truncated" "fields"
awk -F, 'NR == 25 { $12 = "abc" } { print }' OFS=, "$T/sub.csv" >"$T/junk.csv"
expect_rc 2 "envcheck junk reward" -- "$SR" envcheck --env CartPole-v1 --csv "$T/junk.csv" &&
	expect_one_error "junk" "bad reward 'abc'"
sed '40d' "$T/sub.csv" >"$T/gap.csv"
expect_rc 2 "envcheck missing row" -- "$SR" envcheck --env CartPole-v1 --csv "$T/gap.csv" &&
	expect_one_error "gap" "does not follow"
: >"$T/empty.csv"
expect_rc 2 "envcheck empty file" -- "$SR" envcheck --env CartPole-v1 --csv "$T/empty.csv" &&
	expect_one_error "empty" "empty"
head -1 "$T/sub.csv" >"$T/header.csv"
expect_rc 2 "envcheck header only" -- "$SR" envcheck --env CartPole-v1 --csv "$T/header.csv" &&
	expect_one_error "header only" "no data rows"
expect_rc 2 "envcheck CSV of another env" -- \
	"$SR" envcheck --env CartPole-v1 --csv "$REF/MountainCar-v0.csv" &&
	expect_one_error "other env" "do not fit"
expect_rc 2 "envcheck not a reference CSV" -- \
	"$SR" envcheck --env CartPole-v1 --csv "$REF/episodes.csv" && expect_one_error "episodes.csv" "not a reference CSV"
expect_rc 2 "envcheck missing file" -- "$SR" envcheck --env CartPole-v1 --csv "$T/nope.csv" &&
	expect_one_error "missing file" "cannot open"
expect_rc 2 "envcheck no --csv" -- "$SR" envcheck --env CartPole-v1 && expect_one_error "no --csv" "required"
expect_rc 2 "envcheck unknown env" -- "$SR" envcheck --env Foo-v9 --csv "$T/sub.csv" &&
	expect_one_error "unknown env" "known: CartPole-v1"
expect_rc 2 "envcheck spin" -- "$SR" envcheck --env spin --csv "$T/sub.csv" && expect_one_error "spin" "no physical state"
expect_rc 2 "envcheck bad mode" -- "$SR" envcheck --env CartPole-v1 --csv "$T/sub.csv" --mode fast &&
	expect_one_error "bad mode" "--mode"
expect_rc 0 "envcheck --help" -- "$SR" envcheck --help

# ---- a plugin: listed by envs, checked by envcheck against a CSV made here ---
if [ -n "$PLUGIN" ]; then
	expect_rc 0 "envs --plugin" -- "$SR" envs --plugin "$PLUGIN" &&
		expect_line "envs --plugin: the Corridor line" '^Corridor-v0 *corridor *(1,) *Discrete(2) *100' "$T/out"
	# A corridor's episodes (state column pos; reward -0.01 per step, +1 at cell 9).
	printf '%s\n' 'episode,t,pos,action,obs_pos,reward,terminated,truncated' \
		'0,0,3,-1,3,0,0,0' '0,1,3,1,4,-0.01,0,0' '0,2,4,0,3,-0.01,0,0' '0,3,3,1,4,-0.01,0,0' \
		'1,0,8,-1,8,0,0,0' '1,1,8,1,9,1,1,0' >"$T/corridor.csv"
	expect_rc 0 "envcheck --plugin" -- "$SR" envcheck --plugin "$PLUGIN" --csv "$T/corridor.csv" &&
		expect_line "envcheck --plugin: the result" '^rows=6 max_obs_err=0 ' "$T/out"
	sed 's/^1,1,8,1,9,1,1,0$/1,1,8,0,9,1,1,0/' "$T/corridor.csv" >"$T/corridor_bad.csv"
	expect_rc 1 "envcheck --plugin, wrong action" -- "$SR" envcheck --plugin "$PLUGIN" --csv "$T/corridor_bad.csv"
	expect_rc 2 "envcheck --plugin and --env" -- "$SR" envcheck --plugin "$PLUGIN" --env cartpole \
		--csv "$T/corridor.csv" && expect_one_error "both" "one of --env or --plugin"
	expect_rc 2 "envs --plugin missing" -- "$SR" envs --plugin "$T/none.so" && expect_one_error "missing plugin" "cannot load"
fi

# ---- bench ------------------------------------------------------------------
expect_rc 2 "bench without WHAT" -- "$SR" bench && expect_one_error "bench" "available: .*env"
expect_rc 0 "bench --help" -- "$SR" bench --help && expect_line "bench --help lists env" '^  env ' "$T/out"
expect_rc 2 "bench unknown" -- "$SR" bench nope && expect_one_error "bench nope" "unknown benchmark 'nope'"
expect_rc 0 "bench env --help" -- "$SR" bench env --help
expect_rc 2 "bench env no --env" -- "$SR" bench env && expect_one_error "bench env" "--env"
expect_rc 2 "bench env --n 0" -- "$SR" bench env --env cartpole --n 0 && expect_one_error "--n 0" "out of range"
expect_rc 2 "bench env bad spin" -- "$SR" bench env --env spin:cost=3 && expect_one_error "bad spin" "unknown parameter"
for e in CartPole-v1 pendulum spin:obs_dim=4,ep_len=5; do
	if expect_rc 0 "bench env $e --json" -- "$SR" bench env --env "$e" --n 16 --seconds 0.02 --repeat 1 --json; then
		for k in '"env":' '"n_instances":16' '"steps_per_sec":' '"ns_per_step":'; do
			expect_line "bench env json has $k" "$k" "$T/out"
		done
	fi
done

finish
