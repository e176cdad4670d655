#!/usr/bin/env bash
# Configures and builds Tern with CMake's default generator (what a plain `cmake -S . -B build`
# or an embedder's add_subdirectory gets; Unix Makefiles here, not the Ninja of scripts/build.sh)
# in a throw-away tree: the library, the CLI and, where the CUDA toolkit is found, the CUDA module,
# then runs `tern info` from it. A second tree with -DTERN_WITH_CUDA=OFF is configured and
# generated. The built tree is a Debug one at -O0 without debug info: what this checks is the
# generator (its custom commands, generated sources, CUDA rules and link order), the same in every
# build type, and it builds in ~135 s instead of Release's ~180 s (scripts/build.sh builds that).
# Usage: default_generator_test.sh SOURCE_DIR
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
configure nocuda -DTERN_WITH_CUDA=OFF
echo "default generator test passed: built ${targets[*]}"
