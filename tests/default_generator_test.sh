#!/usr/bin/env bash
# Configures and builds Tern with CMake's default generator (what a plain `cmake -S . -B build`
# or an embedder's add_subdirectory gets; Unix Makefiles here) and runs `tern info` from the tree:
# the library, the CLI and, where the CUDA toolkit is found, the CUDA module. A tree with
# -DTERN_WITH_CUDA=OFF is configured and generated too. Where BUILD_DIR (the tree ctest runs in)
# was itself made with the default generator, as scripts/build.sh makes it, that tree is what is
# checked; otherwise (a Ninja tree) a throw-away Debug tree at -O0 without debug info is built:
# what this checks is the generator (its custom commands, generated sources, CUDA rules and link
# order), the same in every build type.
# Usage: default_generator_test.sh SOURCE_DIR [BUILD_DIR]
set -euo pipefail
src="$(cd "$1" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset CMAKE_GENERATOR  # the default, whatever the caller's environment prefers
configure() {  # TREE ARGS...
  local tree="$1"
  shift
  if ! cmake -S "$src" -B "$tmp/$tree" -DTERN_BUILD_TESTS=OFF "$@" > "$tmp/$tree.log" 2>&1; then
    tail -n 30 "$tmp/$tree.log"
    echo "FAIL: configuring with the default generator ($*)"
    exit 1
  fi
  echo "configured $tree: $(grep -o 'CMAKE_GENERATOR:INTERNAL=.*' "$tmp/$tree/CMakeCache.txt"), $(grep -o 'CUDA=[A-Z]*' "$tmp/$tree.log" | head -1)"
}
# The default generator's name, from a tree configured without one (no build).
configure nocuda -DTERN_WITH_CUDA=OFF
default_gen=$(grep -o 'CMAKE_GENERATOR:INTERNAL=.*' "$tmp/nocuda/CMakeCache.txt" | cut -d= -f2-)
if [ -n "${2:-}" ] && [ -x "$2/tern" ] &&
  grep -qx "CMAKE_GENERATOR:INTERNAL=$default_gen" "$2/CMakeCache.txt"; then
  build="$(cd "$2" && pwd)"
  echo "the build tree was made with the default generator ($default_gen): checking it"
  "$build/tern" info | grep '^backends:'
  if grep -q '^TERN_WITH_CUDA:BOOL=ON' "$build/CMakeCache.txt" && [ -f "$build/libtern_cuda.so" ]; then
    "$build/tern" info | grep -q "libtern_cuda.so (loaded" ||
      { echo "FAIL: the tree's tern does not load its CUDA module"; exit 1; }
  fi
  echo "default generator test passed: the build tree ($default_gen) builds and runs"
  exit 0
fi
configure found -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_C_FLAGS_DEBUG=-O0 \
  -DCMAKE_CUDA_FLAGS_DEBUG=-O0
targets=(tern tern_cli)
grep -q 'CUDA=ON' "$tmp/found.log" && targets+=(tern_cuda)
if ! cmake --build "$tmp/found" --parallel "$(nproc)" --target "${targets[@]}" > "$tmp/build.log" 2>&1; then
  grep -E 'error|Error' "$tmp/build.log" | head -n 20
  echo "FAIL: building ${targets[*]} with the default generator"
  exit 1
fi
"$tmp/found/tern" info | grep '^backends:'
if [[ " ${targets[*]} " == *" tern_cuda "* ]]; then
  "$tmp/found/tern" info | grep -q "module $tmp/found/libtern_cuda.so (loaded" ||
    { echo "FAIL: the tree's tern does not load its CUDA module"; exit 1; }
fi
echo "default generator test passed: built ${targets[*]}"
