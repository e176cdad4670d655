#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest (unit suites,
# exported symbols, header, install test, and the ONNX conformance gate); the Rust, Go and Java
# bindings' suites and the samples; the aarch64 minimal build under qemu; then the sanitizer
# builds (ASan + UBSan + LeakSanitizer: every unit suite and the conformance suite; TSan: the
# concurrency and API suites) and each libFuzzer target for 60 s. Tests that need ../shared skip
# with a message when it is absent. TERN_TEST_QUICK=1 stops after ctest, the conformance summary
# and the bindings.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus="$(pwd)/../shared/conformance/onnx-node"
scripts/setup.sh
scripts/build.sh
cd "${TERN_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900
# The conformance summary (closing line), visible in CI's log; per-test results in JSON.
if [ -d "$corpus" ]; then
  ./tern-conformance --dir "$corpus" --json conformance.json | tail -n 2
fi
cd - > /dev/null
# The Rust, Go and Java bindings and the samples, against the build tree and an installed tree.
scripts/bindings_test.sh "${TERN_BUILD_DIR:-build}"
[ "${TERN_TEST_QUICK:-0}" = 1 ] && exit 0
# The mobile build: TERN_MINIMAL for aarch64, its tests and the classifier under qemu.
scripts/aarch64.sh "${TERN_BUILD_DIR:-build}"
scripts/sanitize.sh address
scripts/sanitize.sh thread
scripts/fuzz.sh 60
