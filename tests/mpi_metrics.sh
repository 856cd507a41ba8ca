#!/usr/bin/env bash
# stepring metrics of an MPI pool: rollout --ring-name N on 2 ranks makes the
# local pools N-r0 and N-r1; their series carry rank="0" and rank="1", and
# SIGTERM to the job stops both ranks cleanly (their segments removed).
# usage: mpi_metrics.sh STEPRING
set -u
SR=$1
. "$(dirname "$0")/mpi_env.sh"
N=srtest-mpim-$$
tmp=$(mktemp -d /tmp/srtest-mpim-XXXXXX)
job=
cleanup() {
	[ -n "$job" ] && kill "$job" 2>/dev/null && wait "$job" 2>/dev/null
	"$SR" ring rm --stale "$N-r0" "$N-r1" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
$MPIRUN -np 2 "$SR" rollout --env CartPole-v1 --envs 16 --threads 1 --bind none \
	--steps 1000000000000 --seconds 120 --ring-name "$N" >"$tmp/roll.txt" 2>&1 &
job=$!
both() { "$SR" metrics "$N-r0" "$N-r1" --once >"$tmp/m.txt" 2>&1 && grep -q '^stepring_pools 2$' "$tmp/m.txt"; }
for _ in $(seq 600); do both && break; sleep 0.1; done
both || fail "the two ranks' pools do not show up: $(cat "$tmp/m.txt" "$tmp/roll.txt" | head)"
for r in 0 1; do
	grep -q "^stepring_steps_total{pool=\"$N-r$r\",env=\"CartPole-v1\",worker_kind=\"threads\",mode=\"sync\",rank=\"$r\"} " "$tmp/m.txt" ||
		fail "rank $r: $(grep steps_total "$tmp/m.txt")"
	grep -q "^stepring_envs{pool=\"$N-r$r\",.*rank=\"$r\"} 8$" "$tmp/m.txt" || fail "rank $r envs"
done
# The launcher (timeout, mpirun) passes SIGTERM on to the ranks and exits
# with a status of its own: the ranks' output says how they stopped.
kill -TERM "$job"
wait "$job"
job=
grep -q "stopped by a signal" "$tmp/roll.txt" || fail "rollout: $(cat "$tmp/roll.txt")"
[ ! -e "/dev/shm/$N-r0.stats" ] && [ ! -e "/dev/shm/$N-r1.stats" ] || fail "segments left behind"
echo "ok"
