#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, TERN_FUZZ=ON) into
# ${TERN_FUZZ_BUILD_DIR:-build-address} (configured as scripts/sanitize.sh address does, so one build
# serves both) and runs each for SECONDS (default 60) on a scratch copy of its seed corpus in
# tests/fuzz/corpus/<target>. A crash leaves its input in <build dir>/artifacts and fails the run;
# add it to tests/fuzz/regressions/<target> once fixed.
#   scripts/fuzz.sh [SECONDS] [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_tern_loader fuzz_onnx_importer fuzz_session_run)
build_dir="${TERN_FUZZ_BUILD_DIR:-build-address}"
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTERN_SANITIZE=address -DTERN_WERROR=OFF -DTERN_FUZZ=ON > /dev/null
cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}"
mkdir -p "$build_dir/artifacts"
for t in "${targets[@]}"; do
  name="${t#fuzz_}"
  work="$(mktemp -d)"
  cp tests/fuzz/corpus/"$name"/* "$work"/
  echo "== $t: ${seconds} s"
  log="$build_dir/artifacts/$t.log"
  status=0
  UBSAN_OPTIONS=print_stacktrace=1 "$build_dir/tests/fuzz/$t" "$work" -max_total_time="$seconds" \
    -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build_dir/artifacts/" > "$log" 2>&1 || status=$?
  grep -E "cov: " "$log" | tail -n 1
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|ERROR|SUMMARY" "$log" || true
  rm -rf "$work"
  if [ "$status" -ne 0 ]; then
    echo "$t failed (exit $status): see $build_dir/artifacts"
    exit 1
  fi
done
