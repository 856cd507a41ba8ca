#!/usr/bin/env bash
# Build a libFuzzer target with clang (ASan+UBSan) and run it for N minutes.
#   tools/fuzz.sh TARGET [MINUTES=5] [BUILD_DIR=build-fuzz]
# TARGET: fuzz_ckpt (raw checkpoint files), fuzz_restore (valid-CRC section
# lists through verify, restore and steps), fuzz_refcsv (reference CSVs).
# Crashes land in BUILD_DIR/fuzz-artifacts; the corpus in BUILD_DIR/corpus-TARGET.
# With MINUTES=0 it only replays the corpus (a smoke test). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:?target: fuzz_ckpt, fuzz_restore or fuzz_refcsv}
MIN=${2:-5}
DIR=${3:-build-fuzz}
cmake -S . -B "$DIR" -DCMAKE_C_COMPILER=clang -DSR_FUZZ=ON -DSR_WITH_CUDA=OFF \
	-DSR_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$DIR" --target "$T" -j "${JOBS:-2}"
C="$DIR/corpus-$T"
mkdir -p "$C" "$DIR/fuzz-artifacts"
if [ "$T" = fuzz_refcsv ] && [ -z "$(ls -A "$C")" ]; then
	i=0 # the first byte picks the env, in fuzz_refcsv.c's order
	for e in CartPole-v1 Pendulum-v1 MountainCar-v0 MountainCarContinuous-v0 Acrobot-v1; do
		{ printf "\\x$(printf %02x $i)"; head -40 "tests/refdata/$e.csv"; } >"$C/seed-$i"
		i=$((i + 1))
	done
fi
if [ "$MIN" = 0 ]; then
	SR_FUZZ_SEED_DIR="$C" "$DIR/tests/fuzz/$T" -runs=0 "$C"
	exit
fi
SR_FUZZ_SEED_DIR="$C" "$DIR/tests/fuzz/$T" -max_total_time=$((MIN * 60)) -max_len=262144 \
	-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$DIR/fuzz-artifacts/" "$C"
