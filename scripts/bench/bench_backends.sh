#!/bin/bash
# Benchmarks for the backends API, interleaved so machine noise hits every variant alike:
#  - inter-op threads 1 vs 2 on a two-branch model (intra-op threads 1);
#  - SDPA MATH vs FLASH at sequence lengths 512 and 2048 (time, and peak RSS of a fresh process).
# Usage: scripts/bench/bench_backends.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
dir=/tmp/tern_bench
/usr/bin/python3 "$(dirname "$0")/make_models.py" "$dir" >/dev/null
tern="$build/tern"
summary() { grep -E "^latency|^cpu" | sed -e 's/latency: //' ; }
for r in $(seq "$rounds"); do
  echo "== round $r"
  for interop in 1 2; do
    echo "two_branch threads=1 interop=$interop:"
    "$tern" run "$dir/two_branch.onnx" --threads 1 --interop "$interop" --runs 20 | summary
  done
  for s in 512 2048; do
    for k in MATH FLASH; do
      if [ $k = MATH ]; then f="--run-flag sdp.flash_enabled=false"; else f="--run-flag sdp.math_enabled=false"; fi
      echo "attention S=$s $k (threads 2):"
      "$tern" run "$dir/attention_$s.onnx" --threads 2 --runs 5 $f | summary
    done
  done
done
