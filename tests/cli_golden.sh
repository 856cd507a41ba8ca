#!/usr/bin/env bash
# Golden outputs of the commands whose text is the contract (as hwloc's
# test-hwloc-calc.sh diffs a transcript against its .output file): each
# transcript below is the commands run, their stdout, their stderr (lines
# "2> ") and their exit status, compared with tests/golden/NAME.output.
#   envs.output    `stepring envs` (table, --json, a plugin): ids, spaces,
#                  bounds, time limits that scripts and docs rely on
#   help.output    every command's and subcommand's --help, and the usage a
#                  bare command prints: the documented options
#   errors.output  the one line and the status of bad arguments, for every
#                  command: what a user or a script sees when it is wrong
#   topo.output    placement plans of described topologies (--synthetic):
#                  the same plan on any machine
# Machine and build dependent parts are normalized, not left out: the
# scratch directory reads @TMP@, this machine's CPU list CPUS, and a build
# without Box2D is compared with the golden text less the Box2D envs.
# Not here: figures (masked in cli_tune.sh), hashes (cli_pool.sh), and
# --device cuda, whose answer is a run on a machine with a GPU.
# UPDATE=1 rewrites the golden files (from a build with Box2D).
#   cli_golden.sh STEPRING GOLDEN_DIR [PLUGIN.so]
set -u
SR=$1
GOLDEN=$2
PLUGIN=${3:-}
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

box2d=1
"$SR" envs | grep -q '^LunarLander-v3 ' || box2d=0
if [ "${UPDATE:-0}" = 1 ] && [ $box2d = 0 ]; then
	die "UPDATE=1 needs a build with Box2D (the golden files hold its envs)"
fi

squeeze=0
normalize() {
	sed -e "s|$T|@TMP@|g" -e "s|$PLUGIN|@PLUGIN@|g" \
		-E -e 's/(available: )[0-9][0-9,-]*/\1CPUS/g' |
		if [ $squeeze = 1 ]; then sed -E 's/  +/ /g'; else cat; fi
}

# transcript NAME < command lines: run each line's `stepring ARGS` (quoted
# as in the shell; @TMP@ is the scratch directory, @PLUGIN@ the plugin)
# and compare what they print with the golden file NAME.
transcript() {
	local name=$1 line args l
	: >"$T/raw"
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		args=${line//@TMP@/$T}
		args=${args//@PLUGIN@/$PLUGIN}
		eval "set -- $args"
		run "$SR" "$@"
		{ # (builtins only: a hundred commands, no forks but theirs)
			echo "\$ stepring $line"
			while IFS= read -r l || [ -n "$l" ]; do echo "$l"; done <"$T/out"
			while IFS= read -r l || [ -n "$l" ]; do echo "2> $l"; done <"$T/err"
			echo "[exit $rc]"
		} >>"$T/raw"
	done
	normalize <"$T/raw" >"$T/$name"
	expect_golden "$name" "$T/$name"
}

# Without Box2D or MuJoCo: the golden text less those envs' lines and
# names, and runs of blanks squeezed in both texts (the table's columns are
# as wide as the longest name present).
mujoco=1
"$SR" envs | grep -q '^Hopper-v5 ' || mujoco=0
if [ "${UPDATE:-0}" = 1 ] && [ $mujoco = 0 ]; then
	die "UPDATE=1 needs a build with MuJoCo (the golden files hold its envs)"
fi
missing=
[ $box2d = 0 ] && missing="LunarLander-v3|LunarLanderContinuous-v3|BipedalWalker-v3"
mj="(HalfCheetah|Hopper|Walker2d|Ant|Humanoid|HumanoidStandup|InvertedPendulum"
mj="$mj|InvertedDoublePendulum|Reacher|Swimmer|Pusher)-v[45]"
[ $mujoco = 0 ] && missing="${missing:+$missing|}$mj"
if [ -n "$missing" ]; then
	mkdir "$T/golden"
	for f in "$GOLDEN"/*.output; do
		sed -E -e "/^($missing) /d" -e "/\"id\":\"($missing)\"/d" \
			-e "s/ ($missing) \([a-z_0-9]+\),//g" -e 's/  +/ /g' \
			-e "$([ $mujoco = 0 ] && echo 's/; MuJoCo, as <Name>-v5 .*, Pusher//')" \
			"$f" >"$T/golden/${f##*/}"
	done
	GOLDEN=$T/golden
	squeeze=1
	echo "built without some env families: compared with the golden files less their envs"
fi

plugin_line=
[ -n "$PLUGIN" ] && plugin_line="envs --plugin @PLUGIN@"
transcript envs.output <<EOF
envs
envs --json
$plugin_line
EOF

transcript help.output <<'EOF'
--help
envs --help
envcheck --help
envstats --help
bench --help
bench env --help
bench ring --help
bench replay --help
bench pool --help
bench checkpoint --help
bench loop --help
rollout --help
topo --help
ring --help
checkpoint --help
checkpoint clean --help
sweep --help
diagnose --help
top --help
metrics --help
compare --help

nosuch
checkpoint
EOF

: >"$T/empty.csv"
transcript errors.output <<'EOF'
envs --bogus
envs --plugin @TMP@/none.so
envcheck --env CartPole-v1
envcheck --env Foo-v9 --csv @TMP@/empty.csv
envcheck --env spin --csv @TMP@/empty.csv
envcheck --env CartPole-v1 --csv @TMP@/nope.csv
envcheck --env CartPole-v1 --csv @TMP@/empty.csv
envcheck --env CartPole-v1 --csv @TMP@/empty.csv --mode fast
envstats
envstats --env CartPole-v1 --policy clever
envstats --env CartPole-v1 --policy heuristic --episodes 2
bench
bench nope
bench env
bench env --env cartpole --n 0
bench env --env spin:cost=3
bench pool --env CartPole-v1 --envs 8 --mode async --batch 8
bench pool --env NoSuchEnv
bench pool --seconds x
bench pool --envs 64 --ring-capacity 1000
bench pool --envs 64 --ring-capacity 128
bench loop --bogus
bench loop --policy mlp:0x2
bench loop --policy cnn:8x1
bench loop --mode sideways
bench loop --envs 4 --batch 4
bench loop --h2d --device host
bench checkpoint --backends nope
bench checkpoint --replay-mib -1
rollout --env NoSuchEnv --hash
rollout --env CartPole-v1 --envs 0
rollout --env CartPole-v1 --threads 9999 --synthetic "core:2 pu:1"
rollout --env CartPole-v1 --cpuset 0-999999
rollout --env CartPole-v1 --frob
topo --synthetic "nonsense:4"
topo --bind wrong
topo --near x
topo --near-gpu 0 --near 1
topo --threads 99 --synthetic "core:2 pu:1"
ring frob
ring inspect
ring ls --bogus
ring create sr-golden-x --capacity 1000
checkpoint verify
checkpoint frobnicate x
checkpoint info --bogus x
checkpoint verify @TMP@/none.ckpt
checkpoint verify @TMP@
sweep --envs 0
sweep --envs 1,x
sweep --threads -1
sweep --mode fast
sweep --policy mlp:0x2
sweep --bind everywhere
sweep --env NoSuchEnv-v0
sweep --seconds abc
sweep --out /nonexistent-dir/x.jsonl
sweep --frobnicate
sweep --envs
diagnose --policy none
diagnose --mode async --envs 4 --batch 4
diagnose --mode async --envs 1
diagnose --envs 0
diagnose --procs --mode async --envs 8
top --interval 0
top --count x
top --bogus
EOF

transcript topo.output <<'EOF'
topo --synthetic "pack:2 numa:2 core:8 pu:2" --threads 4
topo --synthetic "pack:2 numa:2 core:8 pu:2" --threads 4 --bind numa
topo --synthetic "numa:2 core:4 pu:2" --threads 4 --near 8-15
topo --synthetic "core:4 pu:2" --threads 3 --cpuset 2-7
topo --synthetic "core:4 pu:2" --threads 3 --bind none
topo --synthetic "core:4 pu:1"
EOF
finish
