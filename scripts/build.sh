#!/usr/bin/env bash
# Configures and builds Tern into ${TERN_BUILD_DIR:-build} (Release) with CMake's default generator
# (Unix Makefiles here: what a plain `cmake -S . -B build` or an embedder's add_subdirectory gets,
# so ctest's default_generator test checks this tree instead of building another). TERN_GENERATOR
# names another one for a new tree (TERN_GENERATOR=Ninja); an existing tree keeps its own.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${TERN_BUILD_DIR:-build}"
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && [ -n "${TERN_GENERATOR:-}" ]; then
  generator=(-G "$TERN_GENERATOR")
fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir" --parallel "$(nproc)"
