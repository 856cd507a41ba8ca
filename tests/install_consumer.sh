#!/usr/bin/env bash
# Install the built tree into a temporary prefix, then build a consumer
# against it twice: with find_package(stepring) and with pkg-config.
# usage: install_consumer.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

mkdir -p "$tmp/src"
cat >"$tmp/src/main.c" <<'C'
#include <stdio.h>
#include <stepring.h>
int main(void)
{
	sr_env_spec spec;
	if (sr_version() != SR_VERSION_HEX)
		return 1;
	if (sr_env_find("CartPole-v1", &spec) != 0 || spec.obs_dim != 4)
		return 1;
	printf("%s %u\n", sr_version_string(), spec.obs_dim);
	return 0;
}
C
cat >"$tmp/src/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(stepring 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE stepring::stepring)
C
cmake -S "$tmp/src" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/b" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/b/consumer" | grep -q '^0\.1\.0 4$'
echo "find_package consumer: ok"

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -o "$tmp/pc" "$tmp/src/main.c" $(pkg-config --cflags --libs stepring)
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc" | grep -q '^0\.1\.0 4$'
echo "pkg-config consumer: ok"
