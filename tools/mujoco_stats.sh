#!/usr/bin/env bash
# Random- and zero-policy statistics of the MuJoCo v5 envs against the MuJoCo
# reference kit's (its stats/: 200 episodes of Gymnasium's envs, seeds
# 1-200), as a Markdown table:
#   tools/mujoco_stats.sh STEPRING STATS_DIR [EPISODES] [IDS...]
# Two runs per env and policy, 200 episodes (EPISODES) each:
#   paired: Gymnasium's seeds 1.. and streams (envstats --paired; the env's
#           rng=numpy draws the reset noise as env.reset(seed) does, NumPy's
#           Generator(PCG64(seed)) the random actions as action_space.seed):
#           the episodes themselves must be Gymnasium's;
#   own:    the env with rng=stepring and stepring's action stream (seed 1):
#           independent episodes, judged as a sample: the mean return within
#           3 standard errors of the difference, the mean length within 10%.
# Exit status 0 when every row is within those limits (and every paired run
# identical), 1 otherwise.
set -u
SR=${1:?usage: mujoco_stats.sh STEPRING STATS_DIR [EPISODES] [IDS...]}
STATS=${2:?usage: mujoco_stats.sh STEPRING STATS_DIR [EPISODES] [IDS...]}
N=${3:-200}
shift $(($# < 3 ? $# : 3))
IDS=("$@")
[ ${#IDS[@]} -gt 0 ] || IDS=(HalfCheetah-v5 Hopper-v5 Walker2d-v5 Ant-v5 Humanoid-v5
	HumanoidStandup-v5 InvertedPendulum-v5 InvertedDoublePendulum-v5 Reacher-v5 Swimmer-v5
	Pusher-v5)
ok=1
num() { # num REGEX TEXT: the first capture group of REGEX in TEXT
	sed -nE "s/$1/\\1/p" <<<"$2" | head -1
}
echo "| env | policy | run | port return (sem) | ref return (sem) | diff / SE | port length | ref length | length diff | length diff / SE | identical episodes |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for id in "${IDS[@]}"; do
	for pol in random zero; do
		ref="$STATS/${pol}_policy.csv"
		for run in paired own; do
			if [ $run = paired ]; then
				out=$("$SR" envstats --env "$id" --policy $pol --paired --seed 1 \
					--episodes "$N" --ref "$ref" 2>&1)
			else
				out=$("$SR" envstats --env "$id:rng=stepring" --policy $pol --seed 1 \
					--episodes "$N" --ref "$ref" 2>&1)
			fi
			rc=$?
			pr=$(num '^port: return ([-0-9.]+) .*' "$out")
			ps=$(num '^port: return [-0-9.]+ \+- [0-9.]+ \(sem ([0-9.]+)\).*' "$out")
			rr=$(num '^ref: +return ([-0-9.]+) .*' "$out")
			rs=$(num '^ref: +return [-0-9.]+ \+- [0-9.]+ \(sem ([0-9.]+)\).*' "$out")
			z=$(num '^return: diff [-+0-9.]+ = ([-0-9.na]+) SE.*' "$out")
			pl=$(num '^port: .* length ([0-9.]+) .*' "$out")
			rl=$(num '^ref: .* length ([0-9.]+) .*' "$out")
			dl=$(num '^length: diff ([-+0-9.]+)%.*' "$out")
			psd=$(num '^port: .* length [0-9.]+ \+- ([0-9.]+) .*' "$out")
			rsd=$(num '^ref: .* length [0-9.]+ \+- ([0-9.]+) .*' "$out")
			rn=$(num '^ref: .*\(([0-9]+) episodes\).*' "$out")
			# the mean length's difference in standard errors of the difference
			zl=$(awk -v a="$pl" -v b="$rl" -v sa="${psd:-0}" -v sb="${rsd:-0}" -v na="$N" \
				-v nb="${rn:-$N}" 'BEGIN { se = sqrt(sa * sa / na + sb * sb / nb)
				if (se > 0) printf "%.2f", (a - b) / se; else printf "%.2f", 0 }')
			same=$(num '.*identical \(length and return to the bit\) ([0-9.]+)%.*' "$out")
			if [ -z "$pr" ] || [ -z "$rr" ] || [ $rc -gt 1 ]; then
				echo "| $id | $pol | $run | error: $(tail -1 <<<"$out") |"
				ok=0
				continue
			fi
			# The identical share only for paired runs; an unpaired run is
			# judged on its mean return (|z| <= 3) and length (10%).
			if [ $run = paired ]; then
				[ "$same" = "100.0" ] || ok=0
			else
				same="-"
				awk -v z="${z:-nan}" -v d="${dl:-nan}" 'BEGIN {
					if (z == "nan" || d == "nan") exit 1
					exit !((z < 0 ? -z : z) <= 3 && (d < 0 ? -d : d) <= 10) }' || ok=0
			fi
			echo "| $id | $pol | $run | $pr ($ps) | $rr ($rs) | $z | $pl | $rl | $dl% | $zl | ${same}${same:+%} |" |
				sed 's/|-%|/| - |/; s/| -% |/| - |/'
		done
	done
done
[ $ok = 1 ] && echo "all within the limits" || echo "OUTSIDE the limits (see the rows above)"
[ $ok = 1 ]
