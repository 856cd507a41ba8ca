#!/usr/bin/env bash
# Build the checkpoint-loader fuzzer with clang and run it for N minutes.
#   tools/fuzz_ckpt.sh [MINUTES=5] [BUILD_DIR=build-fuzz]
# Crashes land in BUILD_DIR/fuzz-artifacts; the corpus in BUILD_DIR/fuzz-corpus.
# Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
MIN=${1:-5}
DIR=${2:-build-fuzz}
cmake -S . -B "$DIR" -DCMAKE_C_COMPILER=clang -DSR_FUZZ=ON -DSR_WITH_CUDA=OFF \
	-DSR_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$DIR" --target fuzz_ckpt -j "${JOBS:-2}"
mkdir -p "$DIR/fuzz-corpus" "$DIR/fuzz-artifacts"
SR_FUZZ_SEED_DIR="$DIR/fuzz-corpus" "$DIR/tests/fuzz/fuzz_ckpt" \
	-max_total_time=$((MIN * 60)) -max_len=262144 -timeout=10 \
	-artifact_prefix="$DIR/fuzz-artifacts/" "$DIR/fuzz-corpus"
