#!/usr/bin/env bash
# The mobile embedding build: TERN_MINIMAL=ON (own portable and NEON kernels, .tern only: no
# oneDNN, OpenBLAS, protobuf or OpenMP; -Os, --gc-sections, LTO) cross-compiled for aarch64 with
# Debian's g++-aarch64-linux-gnu into build-aarch64, then every ctest entry (unit suites, symbols,
# header) run under qemu-aarch64-static, with the PP-OCR classifier converted to .tern by the host
# build (the models suite compares it with ONNX Runtime's reference outputs at 1 and 2 threads).
# The same build links the classifier's selective library from the same objects
# (TERN_SELECTIVE_LIBRARY_FROM: build-aarch64/selective/libtern.so, two more compiles and a
# link): the minimal CLI runs over it (LD_LIBRARY_PATH) and checks the classifier against the
# same reference, and a model with ops it left out must be refused.
# Prints the stripped sizes of the minimal static and shared libraries and of the selective one.
# Usage: scripts/aarch64.sh [HOST_BUILD_DIR]   (default: build; its `tern` converts the model)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
host="${1:-build}"
out="${TERN_AARCH64_BUILD_DIR:-build-aarch64}"
mkdir -p "$out"
classifier="$(pwd)/../shared/models/ppocr_cls/model.onnx"
selective=""
[ -f "$classifier" ] && selective="$classifier"
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERN_MINIMAL=ON \
  "-DTERN_TEST_SUITES=core;api;serialization;models;bad_input;concurrency;cpu_kernels" \
  -DTERN_SELECTIVE_LIBRARY_FROM="$selective" \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake > "$out/configure.log" \
  || { cat "$out/configure.log"; exit 1; }
cmake --build "$out" --parallel "$(nproc)"
models=""
if [ -n "$selective" ]; then
  models="$(pwd)/$out/models"
  rm -rf "$models"
  scripts/tern_models_dir.sh "$host" "$models" ppocr_cls > /dev/null
else
  echo "aarch64: ../shared/models is absent: the converted-model test skips"
fi
# Under qemu, the suites of what differs on aarch64 or in the minimal build: NEON kernels and the
# own GEMMs (cpu_kernels_isa, the cpu_kernels cases of them), the own thread pools (concurrency,
# core), the .tern loader (serialization, bad_input), the C ABI (api, exported_symbols,
# header_c_cxx, fault_injection: no exceptions here) and the converted classifier (models). The
# other suites (ops' reference kernels, optimizer rewrites, CLI, control flow, the remaining
# cpu_kernels cases: oneDNN's, AVX-512's, layouts) run the same portable code natively, in the
# full build's ctest.
qemu_suites="core|api|serialization|models|bad_input|concurrency|cpu_kernels_isa"
qemu_suites+="|fault_injection|exported_symbols|header_c_cxx"
(cd "$out" && TERN_TEST_TERN_MODELS="$models" ctest --output-on-failure --timeout 900 \
  -j "$(nproc)" -R "^($qemu_suites)\$")
# The classifier through the aarch64 CLI and C sample too (under qemu).
qemu=(qemu-aarch64-static -L /usr/aarch64-linux-gnu)
if [ -n "$models" ]; then
  "${qemu[@]}" "$out/tern" run "$models/ppocr_cls.tern" --input "x=$models/ppocr_cls.input_0.npy" \
    --threads 2 --runs 3 | grep -E "output|values|latency"
  "${qemu[@]}" "$out/tern_sample_c" "$models/ppocr_cls.tern" 1 48 192
fi
"${qemu[@]}" "$out/tern" info | grep -iE "capability|minimal|build" | head -4

# The selective library: the classifier's ops only (scripts/selected_ops.py reads them from the
# ONNX model, with the ops the optimizer makes of them). The CLI above runs over it.
sel="$out/selective"
if [ -n "$models" ]; then
  selq=("${qemu[@]}" -E "LD_LIBRARY_PATH=$(pwd)/$sel")
  # A model needing ops this build left out (If, Loop, Scan) is refused, and says why (which
  # also shows the CLI runs over the selective library).
  if "${selq[@]}" "$out/tern" inspect tests/fuzz/corpus/tern_loader/control_flow.tern \
      > "$out/left_out.log" 2>&1; then
    echo "aarch64: the selective library loaded a model with ops it left out"; exit 1
  fi
  grep -q "left out of this selective build" "$out/left_out.log" \
    || { cat "$out/left_out.log"; echo "aarch64: no 'left out' error"; exit 1; }
  # A model of a dtype the selective library left out (its kernels are float32, int32 and int64
  # only: TERN_SELECTIVE_LIBRARY_FROM's types) is refused, and says why.
  /usr/bin/python3 - "$out/float64.onnx" <<'PY'
import sys
from onnx import TensorProto, helper, save
x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])
y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "float64", [x], [y])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
  "$host/tern" convert "$out/float64.onnx" "$out/float64.tern" > /dev/null
  if "${selq[@]}" "$out/tern" inspect "$out/float64.tern" > "$out/left_out_dtype.log" 2>&1; then
    echo "aarch64: the selective library loaded a float64 model"; exit 1
  fi
  grep -q "float64, a dtype left out of this selective build" "$out/left_out_dtype.log" \
    || { cat "$out/left_out_dtype.log"; echo "aarch64: no 'dtype left out' error"; exit 1; }
  # The classifier against ONNX Runtime's reference (tern check's .npy pairs).
  check="$models/ppocr_cls_check"
  mkdir -p "$check"
  /usr/bin/python3 - "$classifier" "$models" "$check" <<'PY'
import os, shutil, sys
import onnx
model, models, check = sys.argv[1:]
g = onnx.load(model, load_external_data=False).graph
init = {i.name for i in g.initializer}
for kind, values, prefix in (("input", [v for v in g.input if v.name not in init], "input_"),
                             ("output", list(g.output), "expected_")):
    for i, v in enumerate(values):
        name = v.name.replace("/", "_").replace(":", "_")
        shutil.copy(os.path.join(models, f"ppocr_cls.{kind}_{i}.npy"),
                    os.path.join(check, f"{prefix}{name}.npy"))
PY
  "${selq[@]}" "$out/tern" check "$models/ppocr_cls.tern" "$check" --atol 1e-4 --rtol 1e-3
  echo "selective library: the classifier matches the reference; Loop and float64 are refused as left out"
fi

# Stripped sizes (a copy each: the build keeps its symbols).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
size_of() {  # NAME FILE
  printf '%s %s bytes (%s KiB)' "$1" "$(stat -c %s "$2")" "$(( $(stat -c %s "$2") / 1024 ))"
}
cp "$out/libtern.a" "$tmp/libtern.a"
cp "$(readlink -f "$out/libtern.so")" "$tmp/libtern.so"
aarch64-linux-gnu-strip --strip-unneeded "$tmp/libtern.a"
aarch64-linux-gnu-strip --strip-all "$tmp/libtern.so"
echo "aarch64 minimal, stripped: $(size_of libtern.a "$tmp/libtern.a"), $(size_of libtern.so "$tmp/libtern.so")"
if [ -n "$models" ]; then
  cp "$(readlink -f "$sel/libtern.so")" "$tmp/libtern_selective.so"
  aarch64-linux-gnu-strip --strip-all "$tmp/libtern_selective.so"
  echo "aarch64 selective (PP-OCR classifier's ops), stripped: $(size_of libtern.so "$tmp/libtern_selective.so")"
fi
echo "libtern.so needs: $(aarch64-linux-gnu-readelf -d "$tmp/libtern.so" | grep NEEDED | grep -o '\[.*\]' | tr -d '[]' | tr '\n' ' ')"
echo "aarch64 stage: ${SECONDS} s"
