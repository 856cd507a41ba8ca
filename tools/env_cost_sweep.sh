#!/usr/bin/env bash
# The pool's efficiency against the cost of one env step: `stepring bench
# pool` on the spin env at each step cost (cost_ns), with CartPole's shape
# (4 floats of obs, episodes of 25 steps), RUNS runs each, interleaved. One
# line per cost: the raw loop's ns a step, efficiency (median of the runs),
# the same in the rounds whose CPUs were equal, and the pool against the
# lockstep loops. The runtime's own work per step (ring columns, the
# batch's hand-off) is a fixed cost: the cheaper the env, the larger its
# share. Figures only; the exit status is 0 whenever the runs ran.
#
#   tools/env_cost_sweep.sh [STEPRING]   (default build/stepring)
#   env: COSTS ("0 25 50 100 200 500 1000 2000", ns), RUNS (3), SECS (2),
#        WARMUP / COOLDOWN (0.3), THREADS (2), ENVS (1024), MODE (sync or
#        async: batch ENVS / 2), CPUSET (none), OUT (keep the JSON lines)
set -uo pipefail
cd "$(dirname "$0")/.."
SR=${1:-build/stepring}
COSTS=${COSTS:-0 25 50 100 200 500 1000 2000}
RUNS=${RUNS:-3}
SECS=${SECS:-2}
WARMUP=${WARMUP:-0.3}
COOLDOWN=${COOLDOWN:-0.3}
THREADS=${THREADS:-2}
ENVS=${ENVS:-1024}
MODE=${MODE:-sync}
if [ -z "${OUT:-}" ]; then
	OUT=$(mktemp)
	trap 'rm -f "$OUT"' EXIT
	keep=0
else
	keep=1
fi
[ -x "$SR" ] || { echo "env_cost_sweep: no stepring binary at $SR (build it first)"; exit 2; }
extra=(--mode "$MODE")
[ "$MODE" = async ] && extra+=(--batch $((ENVS / 2)))
[ -n "${CPUSET:-}" ] && extra+=(--cpuset "$CPUSET")
: >"$OUT"
for ((i = 1; i <= RUNS; i++)); do
	for c in $COSTS; do
		j=$("$SR" bench pool --env "spin:cost_ns=$c,obs_dim=4,ep_len=25" --envs "$ENVS" \
			--threads "$THREADS" "${extra[@]}" --seconds "$SECS" --warmup "$WARMUP" \
			--cooldown "$COOLDOWN" --json) || { echo "env_cost_sweep: cost_ns=$c failed"; exit 1; }
		echo "$c $j" >>"$OUT"
	done
done

# shellcheck source=tools/bench_json.sh
. tools/bench_json.sh
echo "env cost sweep: $MODE, $ENVS envs, $THREADS threads, $RUNS runs of ${SECS}s, $("$SR" version | head -1)"
printf '%-8s %-10s %-10s %-20s %-13s %s\n' cost_ns raw_ns efficiency "equal_cpus (rounds)" \
	eff_lockstep cpu_balance
for c in $COSTS; do
	raw=() eff=() eq=() el=() cb=() eqn=0 rn=0
	while read -r k j; do
		[ "$k" = "$c" ] || continue
		raw+=("$(awk -v r="$(num raw_steps_per_sec "$j")" 'BEGIN { print 1e9 / r }')")
		eff+=("$(num efficiency "$j")")
		el+=("$(num efficiency_lockstep "$j")")
		cb+=("$(num cpu_balance "$j")")
		eq_add "$j"
	done <"$OUT"
	eqs=-
	[ "$eqn" -gt 0 ] && eqs="$(printf '%s\n' "${eq[@]}" | med) ($eqn/$rn)"
	printf '%-8s %-10s %-10s %-20s %-13s %s\n' "$c" \
		"$(printf '%s\n' "${raw[@]}" | med | awk '{ printf "%.1f", $1 }')" \
		"$(printf '%s\n' "${eff[@]}" | med)" "$eqs" \
		"$(printf '%s\n' "${el[@]}" | med)" "$(printf '%s\n' "${cb[@]}" | med)"
done
[ "$keep" = 1 ] && echo "(JSON lines: $OUT)"
exit 0
