#!/usr/bin/env bash
# The C++ sample (samples/cpp, over include/tern/tern.hpp) must print exactly what the C sample
# (samples/c) prints for the same model: same inputs, same outputs, same formatting.
# Usage: sample_cpp_test.sh C_PROGRAM CPP_PROGRAM MODEL [DIM ...]
set -euo pipefail
# Runs at the thread count asked for (as the unit tests: tests/test_main.cpp): the outputs of
# separate processes are compared bitwise, and adaptive threads would move one to 1 thread
# while other processes keep the CPUs busy.
export TERN_ADAPTIVE_THREADS="${TERN_ADAPTIVE_THREADS:-0}"
c_prog="$1" cpp_prog="$2"
shift 2
c_out=$("$c_prog" "$@")
cpp_out=$("$cpp_prog" "$@")
echo "$cpp_out"
[ "$c_out" = "$cpp_out" ] || { echo "the C sample printed:"; echo "$c_out"; echo "differs"; exit 1; }
# An error arrives as tern::Error: status name and Tern's message, exit status 1.
set +e
err=$("$cpp_prog" /nonexistent/model.onnx 2>&1)
rc=$?
set -e
echo "$err"
[ $rc = 1 ] && [[ "$err" == TERN_ERR_IO:* ]] || { echo "expected TERN_ERR_IO and exit 1, got $rc"; exit 1; }
echo "sample_cpp passed"
