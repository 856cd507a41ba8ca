#!/usr/bin/env bash
# The runtime pool's goals, measured: RUNS runs of each configuration of
# the goal (`stepring bench pool ... --json`), then one line per
# configuration with every run's efficiency, the median against the goal,
# and what bounds it on this machine (the lockstep loops' scaling, the
# pool against them, the CPUs' balance), and the efficiency in the rounds
# where the CPUs were equal (`bench pool`'s "equal CPUs": the range over
# the runs that had such rounds, and such rounds / all rounds). Figures
# only: a noisy machine decides nothing here, so the exit status is 0
# whenever the runs ran.
#
#   tools/pool_goals.sh [STEPRING]   (default build/stepring)
#   env: RUNS (3), SECS (3), WARMUP / COOLDOWN (0.5), THREADS (2),
#        CPUSET (none: the pool's own plan), OUT (keep the JSON lines here)
#
# Goals (issue "Runtime pool"): CartPole-v1 sync, 1024 envs: efficiency
# >= 0.9; async, 1024 envs, batch 512: >= 0.85; spin 100 us, 64 envs:
# >= 0.97. One thread, sync and async, are printed for reference.
set -uo pipefail
cd "$(dirname "$0")/.."
SR=${1:-build/stepring}
RUNS=${RUNS:-3}
SECS=${SECS:-3}
WARMUP=${WARMUP:-0.5}
COOLDOWN=${COOLDOWN:-0.5}
THREADS=${THREADS:-2}
if [ -z "${OUT:-}" ]; then
	OUT=$(mktemp)
	trap 'rm -f "$OUT"' EXIT
	keep=0
else
	keep=1
fi
[ -x "$SR" ] || { echo "pool_goals: no stepring binary at $SR (build it first)"; exit 2; }
extra=()
[ -n "${CPUSET:-}" ] && extra=(--cpuset "$CPUSET")
: >"$OUT"

# name | goal (or -) | bench pool arguments
configs=(
	"sync|0.9|--env CartPole-v1 --envs 1024 --threads $THREADS"
	"async|0.85|--env CartPole-v1 --envs 1024 --threads $THREADS --mode async --batch 512"
	"spin|0.97|--env spin:cost_us=100 --envs 64 --threads $THREADS"
	"sync_1t|-|--env CartPole-v1 --envs 1024 --threads 1"
	"async_1t|-|--env CartPole-v1 --envs 1024 --threads 1 --mode async --batch 512"
)
# Runs interleave the configurations, so a slow stretch of the machine
# touches each one instead of all runs of one.
for ((i = 1; i <= RUNS; i++)); do
	for c in "${configs[@]}"; do
		IFS='|' read -r name goal args <<<"$c"
		# shellcheck disable=SC2086
		j=$("$SR" bench pool $args "${extra[@]}" --seconds "$SECS" --warmup "$WARMUP" \
			--cooldown "$COOLDOWN" --json) || { echo "pool_goals: $name failed"; exit 1; }
		echo "$name $j" >>"$OUT"
	done
done

# shellcheck source=tools/bench_json.sh
. tools/bench_json.sh
echo "pool goals: $RUNS runs of ${SECS}s each, $("$SR" version | head -1)"
printf '%-9s %-5s %-26s %-7s %-5s %-13s %-13s %-13s %-19s %s\n' config goal efficiency median met \
	lockstep_scal eff_lockstep cpu_balance equal_cpus steps/s
for c in "${configs[@]}"; do
	IFS='|' read -r name goal args <<<"$c"
	effs=() ls=() el=() cb=() sps=() eq=() eqn=0 rn=0
	while read -r n j; do
		[ "$n" = "$name" ] || continue
		effs+=("$(num efficiency "$j")")
		ls+=("$(num lockstep_scaling "$j")")
		el+=("$(num efficiency_lockstep "$j")")
		cb+=("$(num cpu_balance "$j")")
		sps+=("$(num steps_per_sec "$j")")
		eq_add "$j"
	done <"$OUT"
	range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 }
		END { if (hi + 0 == 0) print "-"; else printf "%.3f-%.3f", lo, hi }'; }
	median=$(printf '%s\n' "${effs[@]}" | med)
	met=-
	[ "$goal" != - ] && met=$(awk -v m="$median" -v g="$goal" 'BEGIN { print (m >= g ? "yes" : "no") }')
	eqs=-
	[ "$eqn" -gt 0 ] && eqs="$(range "${eq[@]}") ($eqn/$rn)"
	printf '%-9s %-5s %-26s %-7s %-5s %-13s %-13s %-13s %-19s %s\n' "$name" "$goal" \
		"$(printf '%.3f,' "${effs[@]}" | sed 's/,$//')" "$median" "$met" "$(range "${ls[@]}")" \
		"$(range "${el[@]}")" "$(range "${cb[@]}")" "$eqs" \
		"$(printf '%s\n' "${sps[@]}" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 }
			END { if (hi >= 1e6) printf "%.1f-%.1f M", lo / 1e6, hi / 1e6;
			      else printf "%.1f-%.1f k", lo / 1e3, hi / 1e3 }')"
done
[ "$keep" = 1 ] && echo "(JSON lines: $OUT)"
exit 0
