#!/usr/bin/env bash
# The language bindings' own test suites against a build tree, then against an installed tree:
#   cargo test (bindings/rust), go test ./... (bindings/go), bindings/java/run-tests.sh,
#   pytest (bindings/python, with /usr/bin/python3 or $PYTHON; installed with pip the second time),
# and each sample (samples/{c,rust,go,java}) run on the PP-OCR classifier (the repository's seed
# model when ../shared is absent). First with TERN_LIB_DIR / TERN_INCLUDE_DIR pointing at the build
# tree; then with neither set, finding the package installed into a temporary prefix through
# pkg-config (PKG_CONFIG_PATH) as a user's machine would.
# Usage: scripts/bindings_test.sh [BUILD_DIR]   (default: build)
set -euo pipefail
# Runs at the thread count asked for (as the unit tests: tests/test_main.cpp): the outputs of
# separate processes are compared bitwise, and adaptive threads would move one to 1 thread
# while other processes keep the CPUs busy.
export TERN_ADAPTIVE_THREADS="${TERN_ADAPTIVE_THREADS:-0}"
cd "$(dirname "$0")/.."
root="$(pwd)"
build="$(cd "${1:-build}" && pwd)"
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="$build/cargo"   # keeps the source tree clean
export GOFLAGS="${GOFLAGS:--count=1}"    # no cached test results
python="${PYTHON:-/usr/bin/python3}"     # Debian's: python3-numpy, -pytest, -dask, -torch
export PYTHONDONTWRITEBYTECODE=1 TERN_CLI="$build/tern"

model=("$root/../shared/models/ppocr_cls/model.onnx" 1 48 192)
[ -f "${model[0]}" ] || model=("$root/tests/fuzz/corpus/tern_loader/matmul.tern" 2)

suite() {  # NAME DIR COMMAND...: runs a test suite, shows its summary lines, fails with it
  local name="$1" dir="$2" log
  shift 2
  log="$(mktemp)"
  echo "== $name: $*"
  if ! (cd "$dir" && "$@") > "$log" 2>&1; then
    cat "$log"; rm -f "$log"; echo "$name failed"; exit 1
  fi
  grep -E "^test result: .* [1-9][0-9]* passed|^--- |^ok|^(PASS|FAIL)|[0-9]+ passed, [0-9]+ failed|^[0-9]+ passed|skipped|libtern [0-9]" "$log" || true
  rm -f "$log"
}

run_suites() {  # LABEL
  suite "Rust bindings ($1)" bindings/rust cargo test
  suite "Go bindings ($1)" bindings/go go test -v ./...
  suite "Java bindings ($1)" bindings/java env TERN_JAVA_BUILD="$build/java" ./run-tests.sh
  echo "== samples ($1): ${model[*]##*/}"
  (cd samples/rust && cargo run --quiet -- "${model[@]}" | tail -n +2 | sed 's/^/  rust: /')
  (cd samples/go && go run . "${model[@]}" | tail -n +2 | sed 's/^/  go:   /')
  (cd samples/java && java -cp "$build/java/tern.jar:/usr/share/java/jna.jar" RunModel.java "${model[@]}" \
     | tail -n +2 | sed 's/^/  java: /')
}

# 1. The build tree.
export TERN_LIB_DIR="$build" TERN_INCLUDE_DIR="$root/include"
export CGO_CFLAGS="-g -O2 -I$TERN_INCLUDE_DIR"  # cgo reads no other variable for its header path
run_suites "TERN_LIB_DIR=$build"
suite "Python package (TERN_LIBRARY=$build/libtern.so)" bindings/python \
  env TERN_LIBRARY="$build/libtern.so" "$python" -m pytest -q -p no:cacheprovider tests
"$build/tern_sample_c" "${model[@]}" | tail -n +2 | sed 's/^/  c:    /'

# 2. An installed tree, found through pkg-config only.
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
unset TERN_LIB_DIR TERN_INCLUDE_DIR
export PKG_CONFIG_PATH="$(dirname "$(find "$prefix" -name tern.pc)")"
export CARGO_TARGET_DIR="$build/cargo-installed"
export CGO_CFLAGS="-g -O2 -I$(pkg-config --variable=includedir tern)"
run_suites "installed, pkg-config"
# The Python package installed offline with pip (no build isolation: Debian's setuptools builds it),
# its tests run against the installed copy and the installed libtern.
"$python" -m pip install -q --no-build-isolation --no-index --no-deps --target "$prefix/python" \
  bindings/python > /dev/null
rm -rf bindings/python/build bindings/python/tern.egg-info
suite "Python package (pip install --target, installed libtern)" "$prefix" \
  env TERN_PY_INSTALLED=1 PYTHONPATH="$prefix/python" \
  TERN_LIBRARY="$(find "$prefix" -name 'libtern.so' | head -1)" \
  "$python" -m pytest -q -p no:cacheprovider "$root/bindings/python/tests"
echo "bindings: Rust, Go, Java and Python suites and samples passed against the build tree and the installed package"
