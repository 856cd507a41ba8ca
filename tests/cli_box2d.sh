#!/usr/bin/env bash
# CLI checks of the Box2D envs: Gymnasium's heuristic controllers land the
# lander and move the walker forward (a random policy does neither);
# envstats compares two samples (same distribution: within the limits;
# another env: outside, exit 1); pools give the same rollouts on any number
# of threads, sync or async; bad options exit 2. Skipped (77) in a
# build without Box2D.
set -u
SR=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$SR" envs | grep -q '^LunarLander-v3 ' || { echo "built without Box2D: skipped"; exit 77; }

field() { # field NAME OUTPUT: the number after "NAME " on the port line
	grep '^port:' <<<"$2" | sed -E "s/.*$1 ([-0-9.]+).*/\1/"
}
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

out=$("$SR" envstats --env LunarLander-v3 --policy heuristic --episodes 30 --batch 30) ||
	fail "heuristic lander: $out"
echo "$out"
landed=$(field "final\\+100" "$out")
ge "$landed" 0.7 || fail "heuristic lander landed $landed of episodes (< 0.7)"
out=$("$SR" envstats --env LunarLanderContinuous-v3 --policy heuristic --episodes 30 --batch 30) ||
	fail "heuristic continuous lander: $out"
echo "$out"
landed=$(field "final\\+100" "$out")
ge "$landed" 0.8 || fail "heuristic continuous lander landed $landed (< 0.8)"
out=$("$SR" envstats --env LunarLander-v3 --policy random --episodes 30 --batch 30) || fail "random lander"
landed=$(field "final\\+100" "$out")
ge 0.05 "$landed" || fail "a random lander lands ($landed)"

out=$("$SR" envstats --env BipedalWalker-v3 --policy heuristic --episodes 16 --batch 16) ||
	fail "heuristic walker: $out"
echo "$out"
ret=$(field return "$out")
ge "$ret" 20 || fail "heuristic walker: mean return $ret < 20"
out=$("$SR" envstats --env BipedalWalker-v3 --policy random --episodes 16 --batch 16) || fail "random walker"
ret=$(field return "$out")
ge -50 "$ret" || fail "random walker: mean return $ret > -50"

# Two samples of one distribution: within the limits, KS p-values printed.
"$SR" envstats --env LunarLander-v3 --episodes 400 --seed 1 --csv-out "$TMP/ref.csv" >/dev/null ||
	fail "csv-out"
[ "$(head -1 "$TMP/ref.csv")" = "env,seed,length,return,terminated,truncated,final_reward" ] ||
	fail "csv-out header"
[ "$(wc -l <"$TMP/ref.csv")" -eq 401 ] || fail "csv-out rows"
out=$("$SR" envstats --env LunarLander-v3 --episodes 400 --seed 2 --ref "$TMP/ref.csv") ||
	fail "same distribution outside the limits: $out"
echo "$out"
grep -Eq '^return: .* ok +KS D=0\.[0-9]+ p=' <<<"$out" || fail "return line: $out"
grep -Eq '^length: .* ok +KS D=0\.[0-9]+ p=' <<<"$out" || fail "length line: $out"
# Another env's episodes as the reference: outside (exit 1), KS p tiny.
"$SR" envstats --env BipedalWalker-v3 --episodes 40 --csv-out "$TMP/bw.csv" >/dev/null || fail "bw csv"
cat "$TMP/ref.csv" >"$TMP/mix.csv"
tail -n +2 "$TMP/bw.csv" >>"$TMP/mix.csv"
out=$("$SR" envstats --env LunarLander-v3 --episodes 200 --ref "$TMP/mix.csv" --ref-env BipedalWalker-v3)
rc=$?
[ $rc -eq 1 ] || fail "another env's reference: exit $rc, want 1: $out"
grep -q OUTSIDE <<<"$out" || fail "no OUTSIDE: $out"
grep -Eq 'length: .*p=[0-9.e-]+' <<<"$out" || fail "no length p: $out"

# --paired: episode k is Gymnasium's seed k for the env and the actions, so
# the episodes do not depend on the batch (nor on which episodes end first);
# against its own output in reverse row order the pairing by seed finds
# every episode identical.
"$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --batch 7 \
	--csv-out "$TMP/p7.csv" >/dev/null || fail "paired batch 7"
"$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --batch 40 \
	--csv-out "$TMP/p40.csv" >/dev/null || fail "paired batch 40"
cmp -s "$TMP/p7.csv" "$TMP/p40.csv" || fail "paired episodes depend on the batch"
{ head -1 "$TMP/p7.csv"; tail -n +2 "$TMP/p7.csv" | tac; } >"$TMP/rev.csv"
out=$("$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --ref "$TMP/rev.csv") ||
	fail "paired against itself: $out"
grep -q 'same length 100.0%, return within 0.01 100.0%' <<<"$out" || fail "paired report: $out"
# Seeds 3..42 meet rows 3..39; rows renumbered by one meet other episodes.
out=$("$SR" envstats --env LunarLanderContinuous-v3 --paired --seed 3 --episodes 40 --ref "$TMP/rev.csv")
grep -q 'paired (37 episodes.*same length 100.0%, return within 0.01 100.0%' <<<"$out" ||
	fail "paired seeds 3..42 against 0..39: $out"
awk -F, -v OFS=, 'NR > 1 { $2 = $2 + 1 } 1' "$TMP/p7.csv" >"$TMP/shift.csv"
out=$("$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --ref "$TMP/shift.csv")
grep -q 'paired (39 episodes' <<<"$out" || fail "paired against shifted seeds: $out"
grep -q 'return within 0.01 100.0%' <<<"$out" && fail "other episodes paired as the same: $out"
# Without --paired the rows are still episodes 0..N-1, whatever ends first.
"$SR" envstats --env LunarLander-v3 --episodes 30 --batch 8 --csv-out "$TMP/b8.csv" >/dev/null ||
	fail "batch 8"
[ "$(cut -d, -f2 "$TMP/b8.csv" | tail -n +2 | tr '\n' ' ')" = "$(seq -s ' ' 0 29) " ] ||
	fail "csv rows are not episodes 0..29"

# Rollout hashes (pools: each worker creates its instances) equal across
# 1 and 3 threads and sync/async.
for e in LunarLander-v3 LunarLanderContinuous-v3 BipedalWalker-v3; do
	n=150
	[ $e = BipedalWalker-v3 ] && n=60
	b1=$("$SR" rollout --env $e --envs 12 --threads 1 --seed 3 --steps $n --hash) || fail "rollout $e"
	b3=$("$SR" rollout --env $e --envs 12 --threads 3 --synthetic "core:4 pu:1" --seed 3 --steps $n --hash) || fail "rollout $e 3 threads"
	ba=$("$SR" rollout --env $e --envs 12 --threads 2 --synthetic "core:4 pu:1" --mode async --batch 5 --seed 3 --steps $n --hash) || fail "rollout $e async"
	[ "$b1" = "$b3" ] || fail "$e: 1 vs 3 threads: $b1 $b3"
	[ "$b1" = "$ba" ] || fail "$e: sync vs async: $b1 $ba"
done

# bench pool: the raw world step of the Box2D envs after the pool's figures.
out=$("$SR" bench pool --env BipedalWalker-v3 --envs 4 --threads 1 --seconds 0.2 --warmup 0.1 \
	--cooldown 0.1) || fail "bench pool walker: $out"
grep -Eq 'raw b2World::Step [0-9]+ ns/step \([0-9]+% of' <<<"$out" || fail "no world step: $out"
"$SR" bench pool --env CartPole-v1 --envs 4 --threads 1 --seconds 0.2 --warmup 0.1 --cooldown 0.1 |
	grep -q b2World && fail "a world step for CartPole"

bad() { # bad TEXT ARGS...: exit 2, one line naming TEXT
	local text=$1
	shift
	"$SR" envstats "$@" >"$TMP/o" 2>"$TMP/e"
	local rc=$?
	[ $rc -eq 2 ] || fail "envstats $*: exit $rc, want 2"
	grep -q -- "$text" "$TMP/e" || fail "envstats $*: message '$(cat "$TMP/e")' lacks '$text'"
}
bad "--env is required"
bad "not one of" --env LunarLander-v3 --policy clever
bad "cannot open" --env LunarLander-v3 --ref "$TMP/none.csv"
bad "heuristic exists" --env CartPole-v1 --policy heuristic --episodes 2
bad "rows for env" --env LunarLander-v3 --ref "$TMP/ref.csv" --ref-env Nope-v0
bad "unknown parameter" --env LunarLander-v3:frob=1
bad "replays Gymnasium's random or zero policy" --env LunarLander-v3 --paired --policy heuristic
echo "OK"
