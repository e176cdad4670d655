#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest (unit suites,
# exported symbols, header, install test, and the ONNX conformance gate); the Rust, Go and Java
# bindings' suites and the samples; the aarch64 minimal build under qemu; then the sanitizer
# builds (ASan + UBSan + LeakSanitizer: every unit suite and the conformance suite; TSan: the
# concurrency and API suites) and each libFuzzer target for 30 s. Tests that need ../shared skip
# with a message when it is absent. TERN_TEST_QUICK=1 stops after ctest, the conformance summary
# and the bindings.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed as it ends and summed at the end, so CI's log shows where its
# minutes go (the target is under 30 on a cold model-corpus cache).
start=$SECONDS
stage_start=$SECONDS
stages=()
stage() {  # NAME: closes the stage that just ran under NAME
  local took=$((SECONDS - stage_start))
  stages+=("$1 ${took}s")
  echo "== stage: $1 took ${took} s (total $((SECONDS - start)) s)"
  stage_start=$SECONDS
}
summary() { echo "== stages: ${stages[*]}; total $((SECONDS - start)) s"; }
corpus="$(pwd)/../shared/conformance/onnx-node"
scripts/setup.sh
stage setup
scripts/build.sh
stage build
cd "${TERN_BUILD_DIR:-build}"
# A job per core: the default-generator test (a build) overlaps the single-threaded suites; the
# suites that measure time or busy cores are RUN_SERIAL (tests/CMakeLists.txt).
ctest --output-on-failure --timeout 900 -j "$(nproc)"
stage ctest
# The conformance summary (closing line), visible in CI's log; per-test results in JSON.
if [ -d "$corpus" ]; then
  ./tern-conformance --dir "$corpus" --json conformance.json | tail -n 2
fi
cd - > /dev/null
stage conformance
# The Rust, Go and Java bindings and the samples, against the build tree and an installed tree.
scripts/bindings_test.sh "${TERN_BUILD_DIR:-build}"
stage bindings
if [ "${TERN_TEST_QUICK:-0}" = 1 ]; then
  summary
  exit 0
fi
# The mobile build: TERN_MINIMAL for aarch64, its tests and the classifier under qemu.
scripts/aarch64.sh "${TERN_BUILD_DIR:-build}"
stage aarch64
scripts/sanitize.sh address
stage asan
scripts/sanitize.sh thread
stage tsan
scripts/fuzz.sh 30
stage fuzz
summary
