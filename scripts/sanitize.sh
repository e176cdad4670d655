#!/usr/bin/env bash
# Builds Tern with a sanitizer (clang, every object instrumented) into
# ${TERN_SANITIZE_BUILD_DIR:-build-<mode>} and runs tests under it:
#   scripts/sanitize.sh address   ASan + UBSan + LeakSanitizer: every unit test suite, then the
#                                 ONNX conformance suite (any report or leak in any test, or a
#                                 listed test that stops passing, fails it). The same build holds
#                                 the libFuzzer targets (TERN_FUZZ=ON), so scripts/fuzz.sh reuses it.
#   scripts/sanitize.sh thread    TSan: the concurrency suite and the API suite
# Any report fails the run. The TSan build leaves OpenMP out of Tern's own code (libgomp is not
# instrumented, so TSan cannot see its barriers); oneDNN and OpenBLAS keep their own threads.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-address}"
build_dir="${TERN_SANITIZE_BUILD_DIR:-build-$mode}"
extra=()
# What each mode builds: ASan every unit suite, the conformance runner, the CLI (the cli suite
# starts it) and the fuzz targets; TSan the test files of the suites it runs only
# (TERN_TEST_SUITES), neither the CLI nor the runner, which those suites do not start.
case "$mode" in
  address)
    extra+=(-DTERN_FUZZ=ON -DTERN_TEST_SUITES=all)
    targets=(tern_unit_tests tern-conformance tern)
    ;;
  thread)
    extra+=(-DCMAKE_DISABLE_FIND_PACKAGE_OpenMP=ON "-DTERN_TEST_SUITES=concurrency;api")
    targets=(tern_unit_tests)
    ;;
  *) echo "usage: scripts/sanitize.sh address|thread" >&2; exit 2 ;;
esac
# -O1 with line tables only: what the sanitizers' documentation recommends, enough for symbolized
# stack traces, and ~40% less compile time than RelWithDebInfo's -O2 -g (two such builds are most
# of the test command's time on two cores).
flags="-O1 -gline-tables-only -DNDEBUG"
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
  -DTERN_SANITIZE="$mode" -DTERN_WERROR=OFF "${extra[@]}" > /dev/null
cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}"
corpus="$(pwd)/../shared/conformance/onnx-node"
# clang builds run on LLVM's OpenMP runtime, whose idle workers spin for 200 ms after a parallel
# region (GCC's libgomp, which release builds use, sleeps within milliseconds): without this the
# thread tests' idle and busy-core checks would measure that spinning.
export KMP_BLOCKTIME=0
if [ "$mode" = address ]; then
  # allocator_may_return_null: the tests check that impossible allocations are reported as
  # TERN_ERR_OUT_OF_MEMORY, which needs malloc to fail rather than ASan to stop the process.
  export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:abort_on_error=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  echo "== ASan+UBSan: unit tests"
  "$build_dir/tests/tern_unit_tests" --no-intro
  if [ -d "$corpus" ]; then
    # --strict: a sanitizer's report or a leak in any test's process fails the run, whatever the
    # test's outcome; --expect: so does a listed test that stops passing under the sanitizers.
    echo "== ASan+UBSan: conformance"
    log="$build_dir/conformance.log"
    status=0
    "$build_dir/tern-conformance" --dir "$corpus" --strict \
      --expect tests/conformance/passing.txt > "$log" || status=$?
    grep -E '^(REGRESSION|ABNORMAL END)' "$log" || true
    tail -n 3 "$log"
    if [ "$status" != 0 ]; then
      echo "ASan+UBSan conformance failed (exit $status): the reports are above, the log in $log" >&2
      exit 1
    fi
  else
    echo "conformance skipped: $corpus is absent"
  fi
else
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$(pwd)/tests/tsan.supp"
  echo "== TSan: concurrency and API suites"
  "$build_dir/tests/tern_unit_tests" --no-intro --test-suite=concurrency,api
fi
