#!/usr/bin/env bash
# Installs the library into a scratch prefix and builds a small consumer
# twice: through find_package(ringkernel) and through pkg-config.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build --prefix "$prefix" >/dev/null

work="$prefix/consumer"
mkdir -p "$work"
cat > "$work/main.c" <<'C'
#include <ringkernel/ringkernel.h>
#include <stdio.h>
int main(void) { printf("ringkernel %s\n", rk_version()); return 0; }
C
cat > "$work/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(ringkernel REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE ringkernel::ringkernel)
C
cmake -S "$work" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$work/build/consumer"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
cc "$work/main.c" -o "$work/pc" $(pkg-config --cflags --libs ringkernel)
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$work/pc"
# The command is installed with the library and runs from there.
"$prefix/bin/ringkernel" --version
"$prefix/bin/ringkernel" info >/dev/null
echo "install: find_package and pkg-config consumers and the ringkernel command OK"
