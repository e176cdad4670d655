#!/usr/bin/env bash
# The mobile embedding build: TERN_MINIMAL=ON (own portable and NEON kernels, .tern only: no
# oneDNN, OpenBLAS or protobuf) cross-compiled for aarch64 with Debian's g++-aarch64-linux-gnu
# into build-aarch64, then every ctest entry (unit suites, symbols, header) run under
# qemu-aarch64-static, with the PP-OCR classifier converted to .tern by the host build (the
# models suite compares it with ONNX Runtime's reference outputs at 1 and 2 threads). Prints the
# stripped sizes of the minimal static and shared libraries.
# Usage: scripts/aarch64.sh [HOST_BUILD_DIR]   (default: build; its `tern` converts the model)
set -euo pipefail
cd "$(dirname "$0")/.."
host="${1:-build}"
out="${TERN_AARCH64_BUILD_DIR:-build-aarch64}"
mkdir -p "$out"
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERN_MINIMAL=ON \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake > "$out/configure.log" \
  || { cat "$out/configure.log"; exit 1; }
cmake --build "$out" --parallel "$(nproc)"
models=""
if [ -f ../shared/models/ppocr_cls/model.onnx ]; then
  models="$(pwd)/$out/models"
  rm -rf "$models"
  scripts/tern_models_dir.sh "$host" "$models" ppocr_cls > /dev/null
else
  echo "aarch64: ../shared/models is absent: the converted-model test skips"
fi
(cd "$out" && TERN_TEST_TERN_MODELS="$models" ctest --output-on-failure --timeout 900)
# The classifier through the aarch64 CLI and C sample too (under qemu).
qemu=(qemu-aarch64-static -L /usr/aarch64-linux-gnu)
if [ -n "$models" ]; then
  "${qemu[@]}" "$out/tern" run "$models/ppocr_cls.tern" --input "x=$models/ppocr_cls.input_0.npy" \
    --threads 2 --runs 3 | grep -E "output|values|latency"
  "${qemu[@]}" "$out/tern_sample_c" "$models/ppocr_cls.tern" 1 48 192
fi
"${qemu[@]}" "$out/tern" info | grep -iE "capability|minimal|build" | head -4
# Stripped sizes (a copy each: the build keeps its symbols).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$out/libtern.a" "$tmp/libtern.a"
cp "$(readlink -f "$out/libtern.so")" "$tmp/libtern.so"
aarch64-linux-gnu-strip --strip-unneeded "$tmp/libtern.a"
aarch64-linux-gnu-strip --strip-all "$tmp/libtern.so"
printf 'aarch64 minimal, stripped: libtern.a %s bytes (%s KiB), libtern.so %s bytes (%s KiB)\n' \
  "$(stat -c %s "$tmp/libtern.a")" "$(( $(stat -c %s "$tmp/libtern.a") / 1024 ))" \
  "$(stat -c %s "$tmp/libtern.so")" "$(( $(stat -c %s "$tmp/libtern.so") / 1024 ))"
echo "libtern.so needs: $(aarch64-linux-gnu-readelf -d "$tmp/libtern.so" | grep NEEDED | grep -o '\[.*\]' | tr -d '[]' | tr '\n' ' ')"
