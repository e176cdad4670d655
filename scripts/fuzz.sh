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
# One fuzzer per core at a time (each is one process on one thread): the same seconds of fuzzing
# each, in less wall time.
run_one() {
  local t="$1" name="${1#fuzz_}" work status=0
  work="$(mktemp -d)"
  cp tests/fuzz/corpus/"$name"/* "$work"/
  UBSAN_OPTIONS=print_stacktrace=1 "$build_dir/tests/fuzz/$t" "$work" -max_total_time="$seconds" \
    -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build_dir/artifacts/" > "$build_dir/artifacts/$t.log" 2>&1 || status=$?
  rm -rf "$work"
  echo "$status" > "$build_dir/artifacts/$t.status"
}
jobs_max="$(nproc)"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  echo "== $t: ${seconds} s"
  run_one "$t" &
done
wait
failed=0
for t in "${targets[@]}"; do
  log="$build_dir/artifacts/$t.log"
  echo "== $t"
  grep -E "cov: " "$log" | tail -n 1
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|ERROR|SUMMARY" "$log" || true
  status="$(cat "$build_dir/artifacts/$t.status" 2>/dev/null || echo 1)"
  if [ "$status" -ne 0 ]; then
    echo "$t failed (exit $status): see $build_dir/artifacts"
    failed=1
  fi
done
exit "$failed"
