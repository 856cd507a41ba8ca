#!/usr/bin/env bash
# CLI checks of the Box2D envs: Gymnasium's heuristic controllers land the
# lander and move the walker forward (a random policy does neither);
# envstats compares two samples (same distribution: within the limits;
# another env: outside, exit 1); pools give the same rollouts on any number
# of threads, sync or async; bad options exit 2. Skipped (77) in a
# build without Box2D.
set -u
SR=$1
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
"$SR" envs | grep -q '^LunarLander-v3 ' || skip "built without Box2D"

field() { # field NAME OUTPUT: the number after "NAME " on the port line
	grep '^port:' <<<"$2" | sed -E "s/.*$1 ([-0-9.]+).*/\1/"
}

out=$("$SR" envstats --env LunarLander-v3 --policy heuristic --episodes 30 --batch 30) ||
	fail "heuristic lander: exit $?, expected 0: $out"
echo "$out"
landed=$(field "final\\+100" "$out")
expect_num "heuristic lander: share of episodes landed" "$landed" ">=" 0.7
out=$("$SR" envstats --env LunarLanderContinuous-v3 --policy heuristic --episodes 30 --batch 30) ||
	fail "heuristic continuous lander: exit $?, expected 0: $out"
echo "$out"
landed=$(field "final\\+100" "$out")
expect_num "heuristic continuous lander: share landed" "$landed" ">=" 0.8
out=$("$SR" envstats --env LunarLander-v3 --policy random --episodes 30 --batch 30) || fail "random lander: exit $?, expected 0"
landed=$(field "final\\+100" "$out")
expect_num "random lander: share landed" "$landed" "<=" 0.05

out=$("$SR" envstats --env BipedalWalker-v3 --policy heuristic --episodes 16 --batch 16) ||
	fail "heuristic walker: exit $?, expected 0: $out"
echo "$out"
ret=$(field return "$out")
expect_num "heuristic walker: mean return" "$ret" ">=" 20
out=$("$SR" envstats --env BipedalWalker-v3 --policy random --episodes 16 --batch 16) || fail "random walker: exit $?, expected 0"
ret=$(field return "$out")
expect_num "random walker: mean return" "$ret" "<=" -50

# Two samples of one distribution: within the limits, KS p-values printed.
"$SR" envstats --env LunarLander-v3 --episodes 400 --seed 1 --csv-out "$T/ref.csv" >/dev/null ||
	fail "csv-out: exit $?, expected 0"
expect_eq "csv-out header" "env,seed,length,return,terminated,truncated,final_reward" \
	"$(head -1 "$T/ref.csv")"
expect_lines "csv-out rows" 401 "$T/ref.csv"
out=$("$SR" envstats --env LunarLander-v3 --episodes 400 --seed 2 --ref "$T/ref.csv") ||
	fail "same distribution outside the limits: exit $?, expected 0: $out"
echo "$out"
expect_line -E "the return line" '^return: .* ok +KS D=0\.[0-9]+ p=' <<<"$out"
expect_line -E "the length line" '^length: .* ok +KS D=0\.[0-9]+ p=' <<<"$out"
# Another env's episodes as the reference: outside (exit 1), KS p tiny.
"$SR" envstats --env BipedalWalker-v3 --episodes 40 --csv-out "$T/bw.csv" >/dev/null || fail "bw csv: exit $?, expected 0"
cat "$T/ref.csv" >"$T/mix.csv"
tail -n +2 "$T/bw.csv" >>"$T/mix.csv"
out=$("$SR" envstats --env LunarLander-v3 --episodes 200 --ref "$T/mix.csv" --ref-env BipedalWalker-v3)
rc=$?
expect_eq "another env's reference: exit status" 1 "$rc"
expect_line "another env's reference: OUTSIDE" OUTSIDE <<<"$out"
expect_line -E "another env's reference: the length p-value" 'length: .*p=[0-9.e-]+' <<<"$out"

# --paired: episode k is Gymnasium's seed k for the env and the actions, so
# the episodes do not depend on the batch (nor on which episodes end first);
# against its own output in reverse row order the pairing by seed finds
# every episode identical.
"$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --batch 7 \
	--csv-out "$T/p7.csv" >/dev/null || fail "paired batch 7: exit $?, expected 0"
"$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --batch 40 \
	--csv-out "$T/p40.csv" >/dev/null || fail "paired batch 40: exit $?, expected 0"
cmp -s "$T/p7.csv" "$T/p40.csv" ||
	fail "paired episodes: expected the same CSV for batch 7 and 40, got: $(diff "$T/p7.csv" "$T/p40.csv" | head -4)"
{ head -1 "$T/p7.csv"; tail -n +2 "$T/p7.csv" | tac; } >"$T/rev.csv"
out=$("$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --ref "$T/rev.csv") ||
	fail "paired against itself: exit $?, expected 0: $out"
expect_line "paired report" 'same length 100.0%, return within 0.01 100.0%' <<<"$out"
# Seeds 3..42 meet rows 3..39; rows renumbered by one meet other episodes.
out=$("$SR" envstats --env LunarLanderContinuous-v3 --paired --seed 3 --episodes 40 --ref "$T/rev.csv")
expect_line "paired seeds 3..42 against 0..39" \
	'paired (37 episodes.*same length 100.0%, return within 0.01 100.0%' <<<"$out"
awk -F, -v OFS=, 'NR > 1 { $2 = $2 + 1 } 1' "$T/p7.csv" >"$T/shift.csv"
out=$("$SR" envstats --env LunarLanderContinuous-v3 --paired --episodes 40 --ref "$T/shift.csv")
expect_line "paired against shifted seeds" 'paired (39 episodes' <<<"$out"
expect_no_line "other episodes not paired as the same" 'return within 0.01 100.0%' <<<"$out"
# Without --paired the rows are still episodes 0..N-1, whatever ends first.
"$SR" envstats --env LunarLander-v3 --episodes 30 --batch 8 --csv-out "$T/b8.csv" >/dev/null ||
	fail "batch 8: exit $?, expected 0"
expect_eq "csv rows are episodes 0..29" "$(seq -s ' ' 0 29) " \
	"$(cut -d, -f2 "$T/b8.csv" | tail -n +2 | tr '\n' ' ')"

# Rollout hashes (pools: each worker creates its instances) equal across
# 1 and 3 threads and sync/async.
for e in LunarLander-v3 LunarLanderContinuous-v3 BipedalWalker-v3; do
	n=150
	[ $e = BipedalWalker-v3 ] && n=60
	b1=$("$SR" rollout --env $e --envs 12 --threads 1 --seed 3 --steps $n --hash) || fail "rollout $e: exit $?, expected 0"
	b3=$("$SR" rollout --env $e --envs 12 --threads 3 --synthetic "core:4 pu:1" --seed 3 --steps $n --hash) || fail "rollout $e 3 threads: exit $?, expected 0"
	ba=$("$SR" rollout --env $e --envs 12 --threads 2 --synthetic "core:4 pu:1" --mode async --batch 5 --seed 3 --steps $n --hash) || fail "rollout $e async: exit $?, expected 0"
	expect_eq "$e: 3 threads as 1" "$b1" "$b3"
	expect_eq "$e: async as sync" "$b1" "$ba"
done

# bench pool: the raw world step of the Box2D envs after the pool's figures.
out=$("$SR" bench pool --env BipedalWalker-v3 --envs 4 --threads 1 --seconds 0.2 --warmup 0.1 \
	--cooldown 0.1) || fail "bench pool walker: exit $?, expected 0: $out"
expect_line -E "bench pool walker: the world step" 'raw b2World::Step [0-9]+ ns/step \([0-9]+% of' <<<"$out"
"$SR" bench pool --env CartPole-v1 --envs 4 --threads 1 --seconds 0.2 --warmup 0.1 --cooldown 0.1 |
	expect_no_line "no world step for CartPole" b2World

bad() { # bad TEXT ARGS...: exit 2, one line naming TEXT
	local text=$1
	shift
	expect_usage_error "$SR" envstats "$@" && expect_one_error "envstats $*" "$text"
}
bad "--env is required"
bad "not one of" --env LunarLander-v3 --policy clever
bad "cannot open" --env LunarLander-v3 --ref "$T/none.csv"
bad "heuristic exists" --env CartPole-v1 --policy heuristic --episodes 2
bad "rows for env" --env LunarLander-v3 --ref "$T/ref.csv" --ref-env Nope-v0
bad "unknown parameter" --env LunarLander-v3:frob=1
bad "replays Gymnasium's random or zero policy" --env LunarLander-v3 --paired --policy heuristic
finish
