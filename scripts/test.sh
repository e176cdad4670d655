#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest (unit suites,
# exported symbols, and the ONNX conformance gate). Tests that need ../shared skip with a message
# when it is absent.
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
