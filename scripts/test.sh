#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest.
# Tests that need ../shared (real models) skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd "${TERN_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900
