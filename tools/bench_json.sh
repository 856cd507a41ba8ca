# Helpers for the scripts that read `stepring bench pool --json` lines
# (tools/pool_goals.sh, tools/env_cost_sweep.sh). Sourced, not run.

# The first "NAME": number in JSON line $2 (the run's own figure, not a
# round's).
num() { grep -o "\"$1\":[-0-9.e+]*" <<<"$2" | head -1 | cut -d: -f2; }

# The median of the numbers on stdin (%.3f), zeros left out (not
# measured), or - when none is left.
med() {
	sort -g | awk '$1 + 0 != 0 { v[++n] = $1 }
		END { if (!n) print "-"; else if (n % 2) printf "%.3f", v[(n + 1) / 2];
		      else printf "%.3f", (v[n / 2] + v[n / 2 + 1]) / 2 }'
}

# Adds JSON line $1's rounds with equal CPUs (bench pool's "equal CPUs")
# to the caller's eq (each such run's efficiency there), eqn (such rounds)
# and rn (all rounds).
eq_add() {
	local k
	k=$(num equal_cpu_rounds "$1")
	rn=$((rn + $(num rounds "$1")))
	if [ "${k:-0}" -gt 0 ]; then
		eq+=("$(num efficiency_equal_cpus "$1")")
		eqn=$((eqn + k))
	fi
}
