#!/usr/bin/env bash
# GPU check for the CUDA device path, in one go (under 5 minutes, and about
# one more for step 4):
#   1. configure with CUDA, build the CLI and the tests (build-gpu/);
#   2. run the gpu-labelled tests (and the host device tests);
#   3. print a table: H2D bandwidth of a batch from the registered ring vs
#      cudaMemcpy from a pinned buffer of the same size, and closed-loop
#      steps/s against env-only steps/s for CartPole and spin at three
#      policy sizes;
#   4. the runtime pool's goals on this machine's CPUs (tools/pool_goals.sh,
#      about a minute; POOL_RUNS=0 skips it, POOL_SECS).
# Without a GPU (or without nvcc) it says so and exits 77.
#
#   tools/gpu_check.sh [BUILD_DIR]   (env: JOBS, SECONDS_PER_RUN, ENVS, SPIN)
# Needs what tools/dev deps installs (cmake, hwloc, cmocka, dlpack ...).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
JOBS=${JOBS:-$(nproc)}
SECS=${SECONDS_PER_RUN:-2}
ENVS=${ENVS:-16384}
SPIN=${SPIN:-spin:cost_us=2,obs_dim=64}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu_check: no GPU answers (nvidia-smi missing or failing): nothing to check"
	exit 77
fi
if [ ! -x "$NVCC" ]; then
	echo "gpu_check: no nvcc (CUDA toolkit) found: cannot build the CUDA device"
	exit 77
fi
nvidia-smi -L

echo "== configure and build ($B, CUDA on)"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSR_WITH_CUDA=ON \
	-DCMAKE_CUDA_COMPILER="$NVCC" >"$B.cmake.log" 2>&1 ||
	{ tail -30 "$B.cmake.log"; exit 1; }
cmake --build "$B" -j "$JOBS" --target stepring_cli test_gpu test_device >"$B.build.log" 2>&1 ||
	{ tail -40 "$B.build.log"; exit 1; }
"$B/stepring" version

echo "== tests (label gpu, and the host device tests)"
(cd "$B" && ctest --output-on-failure -R '^(test_gpu|test_device)$') || exit 1
"$B/tests/test_gpu"
rc=$?
if [ $rc -eq 77 ]; then
	echo "gpu_check: the build's CUDA runtime sees no GPU (driver too old for this toolkit?)"
	exit 77
fi
[ $rc -eq 0 ] || exit 1

echo "== collector placement (worker 0 near GPU 0, from hwloc)"
"$B/stepring" topo --near-gpu 0 || echo "gpu_check: hwloc does not place GPU 0 (not fatal)"

# Pull "key":value out of a one-line JSON object.
jget() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$2"; }

echo "== H2D bandwidth"
h2d=$("$B/stepring" bench loop --h2d --mib 64 --json) || exit 1
echo "$h2d"
echo "== closed loop ($ENVS envs, ${SECS}s windows)"
rows=()
run() { # ENV POLICY MODE
	local j
	j=$("$B/stepring" bench loop --env "$1" --envs "$ENVS" --policy "$2" --mode "$3" \
		--device cuda --seconds "$SECS" --warmup 0.5 --json) || exit 1
	echo "$j"
	rows+=("$j")
}
run CartPole-v1 mlp:64x2 sync
for env in CartPole-v1 "$SPIN"; do
	for pol in mlp:64x2 mlp:256x4 mlp:1024x8; do
		run "$env" "$pol" async
	done
done
echo
echo "== stepring gpu_check: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
printf '%-34s %12s\n' "H2D, one batch of $(($(jget bytes "$h2d") / 1048576)) MiB" "GB/s"
printf '%-34s %12s\n' "  from the ring (registered: $(jget ring_registered "$h2d"))" \
	"$(jget ring_gbs "$h2d")"
printf '%-34s %12s\n' "  via pinned staging" "$(jget staging_gbs "$h2d")"
printf '%-34s %12s\n' "  cudaMemcpy from pinned" "$(jget pinned_gbs "$h2d")"
printf '%-34s %12s   (goal >= 0.9)\n' "  ring / pinned" "$(jget ring_over_pinned "$h2d")"
echo
printf '%-14s %-12s %6s %14s %14s %7s %9s %9s\n' env policy mode env_only_sps loop_sps ratio \
	us_copy us_policy
for j in "${rows[@]}"; do
	printf '%-14s %-12s %6s %14.0f %14.0f %7s %9s %9s\n' "$(jget env "$j")" \
		"$(jget policy "$j")" "$(jget mode "$j")" "$(jget env_only_steps_per_sec "$j")" \
		"$(jget loop_steps_per_sec "$j")" "$(jget ratio "$j")" "$(jget us_copy "$j")" \
		"$(jget us_policy "$j")"
done
echo "(goal: CartPole with the small policy, ratio >= 0.8)"
# Not GPU work: the runtime pool's goals on this machine's cores, which
# (unlike a 2-vCPU VM's) may step at equal speeds. 1 s runs keep it short.
if [ "${POOL_RUNS:-3}" -gt 0 ]; then
	echo
	echo "== pool goals on this machine's CPUs (tools/pool_goals.sh, 1 s runs)"
	RUNS=${POOL_RUNS:-3} SECS=${POOL_SECS:-1} WARMUP=0.3 COOLDOWN=0.2 \
		tools/pool_goals.sh "$B/stepring" || echo "gpu_check: pool goals did not run (not fatal)"
fi
