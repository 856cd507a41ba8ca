#!/usr/bin/env bash
# The installed package (headers, libstepring, CMake config, stepring.pc)
# builds a consumer through find_package(stepring) and through pkg-config,
# for two layouts:
#   1. BUILD_DIR installed into a temporary prefix (libdir as configured);
#   2. a Debian-style install: the library configured with
#      -DCMAKE_INSTALL_PREFIX=/usr (libdir lib/<multiarch>), installed with
#      DESTDIR into a temporary root. Nothing is written to the real /usr.
# usage: install_consumer.sh BUILD_DIR [SOURCE_DIR]
set -u
build=$1
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"
tmp=$T

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

# consume PREFIX LIBDIR NAME: build and run the consumer both ways against
# the tree installed under PREFIX with its libraries in PREFIX/LIBDIR.
consume() {
	local prefix=$1 libdir=$2 name=$3 inc
	expect_rc 0 "$name: configure the find_package consumer" \
		cmake -S "$tmp/src" -B "$tmp/b-$name" -DCMAKE_PREFIX_PATH="$prefix" &&
	expect_rc 0 "$name: build it" cmake --build "$tmp/b-$name" &&
	expect_rc 0 "$name: run it" env LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/b-$name/consumer" &&
	expect_line -x "$name: find_package consumer's output" '0\.1\.0 4' "$T/out" &&
	ok "$name: find_package consumer"

	inc=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --variable=includedir stepring)
	[ -f "$inc/stepring.h" ] || fail "$name: expected stepring.h in pkg-config's includedir '$inc'"
	# shellcheck disable=SC2046
	expect_rc 0 "$name: build the pkg-config consumer" cc -o "$tmp/pc-$name" "$tmp/src/main.c" \
		$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs stepring) &&
	expect_rc 0 "$name: run it" env LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/pc-$name" &&
	expect_line -x "$name: pkg-config consumer's output" '0\.1\.0 4' "$T/out" &&
	ok "$name: pkg-config consumer"
}

# 1. The build tree, installed into a temporary prefix.
expect_rc 0 "install the build tree" cmake --install "$build" --prefix "$tmp/prefix" ||
	die "nothing installed"
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
consume "$tmp/prefix" "${libdir:-lib}" prefix

# 2. /usr with the multiarch libdir, into a DESTDIR (library only).
arch=$(gcc -print-multiarch 2>/dev/null || true)
arch=${arch:-$(uname -m)-linux-gnu}
if ! expect_rc 0 "configure with prefix /usr" \
	cmake -S "$src" -B "$tmp/usr-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	-DCMAKE_INSTALL_LIBDIR="lib/$arch" -DSR_BUILD_TESTS=OFF -DSR_BUILD_TOOLS=OFF \
	-DSR_WITH_CUDA=OFF ||
	! expect_rc 0 "build it" \
	cmake --build "$tmp/usr-build" -j2 --target stepring stepring_static stepring_worker ||
	! expect_rc 0 "install it into a DESTDIR" env DESTDIR="$tmp/root" cmake --install "$tmp/usr-build"
then
	die "nothing installed under /usr"
fi
for f in "lib/$arch/pkgconfig/stepring.pc" include/stepring.h; do
	[ -f "$tmp/root/usr/$f" ] || fail "expected /usr/$f installed, it is not"
done
consume "$tmp/root/usr" "lib/$arch" usr
finish
