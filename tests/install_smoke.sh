#!/bin/sh
# Installs kiln into a temporary prefix and builds examples/hello.c (libkiln) and
# examples/generate.c (libkiln_models) against it, each twice: with pkg-config and with the CMake
# package. Every program must run and print a result.
set -eu
build="$1"
src=$(cd "$2" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib* | head -n 1)

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c17 "$src/examples/hello.c" -o "$prefix/hello-pc" $(pkg-config --cflags --libs kiln) -Wl,-rpath,"$libdir"
"$prefix/hello-pc" | grep -q 'tensor(' || { echo "FAIL: pkg-config build"; exit 1; }
# A model directory with a tokenizer, from the test fixtures.
model="$src/tests/fixtures/lm/llama3"
cc -std=c17 "$src/examples/generate.c" -o "$prefix/generate-pc" $(pkg-config --cflags --libs kiln-models) -Wl,-rpath,"$libdir"
"$prefix/generate-pc" "$model" "Hello" 4 | grep -q '^Hello' || { echo "FAIL: pkg-config build of generate.c"; exit 1; }

mkdir -p "$prefix/cm"
cat > "$prefix/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(hello C)
find_package(kiln REQUIRED)
add_executable(hello $src/examples/hello.c)
target_link_libraries(hello PRIVATE kiln::kiln_shared)
add_executable(generate $src/examples/generate.c)
target_link_libraries(generate PRIVATE kiln::kiln_models)
CM
cmake -S "$prefix/cm" -B "$prefix/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cm/build" >/dev/null
"$prefix/cm/build/hello" | grep -q 'tensor(' || { echo "FAIL: CMake package build"; exit 1; }
"$prefix/cm/build/generate" "$model" "Hello" 4 | grep -q '^Hello' || { echo "FAIL: CMake package build of generate.c"; exit 1; }
echo "install_smoke: 1 passed, 0 failed"
