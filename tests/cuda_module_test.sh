#!/usr/bin/env bash
# The CUDA backend is a module libtern opens on demand (backends/module_loader.h):
# - libtern.so needs no CUDA library (readelf -d), in every build;
# - a CPU run never maps a CUDA or Vulkan library (the dynamic linker's own log of what it opens);
# and where the build has the module (libtern_cuda.so):
# - in the build tree it is found beside libtern, and the CUDA queries answer from it;
# - with the module absent, the C sample runs as before, `tern info` says where it looked, and a
#   session asking for cuda is refused with a message naming the missing module;
# - with a library the module needs broken, the same, naming that library;
# - with no CUDA driver (as on machines without a GPU), the refusal names the driver.
# Usage: cuda_module_test.sh BUILD_DIR MODEL [DIM ...]
set -euo pipefail
build="$(cd "$1" && pwd)"
shift
model=("$@")
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # TEXT PATTERN WHAT
  grep -qE -- "$2" <<< "$1" || { echo "$1" | head -20; fail "$3: no match for '$2'"; }
}

# `tern run` shape options for the model's inputs: dynamic dims take the DIMs in order (as the C
# sample does).
shapes=()
dims=("${model[@]:1}")
while IFS= read -r line; do
  name=$(sed -E "s/^input '([^']*)'.*/\1/" <<< "$line")
  IFS=, read -ra ds <<< "$(sed -E 's/.*\[(.*)\]$/\1/' <<< "$line")"
  out=""
  for d in "${ds[@]}"; do
    if [ "$d" = -1 ]; then d=${dims[0]:-1}; dims=("${dims[@]:1}"); fi
    out+="${out:+x}$d"
  done
  shapes+=(--shape "$name=$out")
done < <("$build/tern" info "${model[0]}" | grep "^input '")

needed=$(readelf -d "$build/libtern.so" | grep NEEDED || true)
if grep -qiE 'cuda|cublas|cudnn|nvrtc' <<< "$needed"; then
  echo "$needed"
  fail "libtern.so links a CUDA library"
fi
echo "ok: libtern.so needs $(grep -c NEEDED <<< "$needed") libraries, none of them CUDA's"

# A CPU session never opens the module, a CUDA library or the Vulkan loader.
log=$(LD_DEBUG=files "$build/tern" run "${model[0]}" "${shapes[@]}" --backends cpu --runs 1 2>&1 >/dev/null)
device_libs='file=[^ ]*(tern_cuda|cublas|cudnn|libcuda|vulkan)'
if grep -qiE "$device_libs" <<< "$log"; then
  grep -iE "$device_libs" <<< "$log" | head
  fail "a CPU run opened a device library"
fi
echo "ok: a CPU run opens no CUDA or Vulkan library"

if [ ! -f "$build/libtern_cuda.so" ]; then
  echo "this build has no CUDA module (TERN_WITH_CUDA=OFF): nothing more to check"
  exit 0
fi

# The build tree: found beside libtern.
info=$("$build/tern" info)
expect "$info" "module $build/libtern_cuda.so \(loaded" "tern info in the build tree"
expect "$info" "cuda built=1" "tern info in the build tree"
run=$("$build/tern" run "${model[0]}" "${shapes[@]}" --backends cuda --runs 1 2>&1) && ok=1 || ok=0
if grep -q "cuda built=1 available=1" <<< "$info"; then
  [ $ok = 1 ] || { echo "$run"; fail "a cuda session failed on a machine with a CUDA device"; }
  echo "ok: a cuda session runs on this machine's GPU"
else
  [ $ok = 0 ] || fail "a cuda session was created without a CUDA device"
  expect "$run" "TERN_ERR_BACKEND_UNAVAILABLE|BACKEND_UNAVAILABLE" "cuda session without a device"
  expect "$run" "no CUDA device usable here \((no CUDA driver|the CUDA driver|no CUDA device)" \
    "cuda session without a device"
  echo "ok: without a device: $(grep -oE 'no CUDA device usable here \([^)]*\)?' <<< "$run" | head -1)"
fi

# The C sample against a libtern whose module is absent.
mkdir -p "$tmp/absent"
cp -P "$build"/libtern.so* "$tmp/absent/"
src="$(cd "$(dirname "$0")/.." && pwd)"
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/samples/c/run_model.c" -I "$src/include" \
   -L "$tmp/absent" -ltern -Wl,-rpath,"$tmp/absent" -o "$tmp/absent/run_model"
want=$("$build/tern_sample_c" "${model[@]}")
got=$("$tmp/absent/run_model" "${model[@]}") || fail "the C sample failed without the CUDA module"
[ "$got" = "$want" ] || { echo "$got"; fail "the C sample printed something else without the module"; }
echo "ok: the C sample runs with the CUDA module absent"
info=$(LD_LIBRARY_PATH="$tmp/absent" "$build/tern" info)
if grep -q "module /" <<< "$info"; then
  echo "note: a libtern_cuda.so of this build is installed where libtern also looks:"
  grep "cuda:" <<< "$info"
else
  expect "$info" "libtern_cuda.so was not found \(looked in: $tmp/absent/libtern_cuda.so" \
    "tern info without the module"
  expect "$info" "cuda built=0 available=0 devices=0" "tern info without the module"
  run=$(LD_LIBRARY_PATH="$tmp/absent" "$build/tern" run "${model[0]}" --backends cuda 2>&1) &&
    fail "a cuda session was created without the module"
  expect "$run" "needs its module, and libtern_cuda.so was not found \(looked in: $tmp/absent" \
    "cuda session without the module"
  echo "ok: without the module, tern info and the refusal say where it was looked for"
fi

# A library the module needs that cannot be loaded (an empty file found first on the path).
mkdir -p "$tmp/broken"
cp -P "$build"/libtern.so* "$build/libtern_cuda.so" "$tmp/broken/"
lt=$(readelf -d "$build/libtern_cuda.so" | grep -oE 'libcublasLt\.so[.0-9]*' | head -1)
: > "$tmp/broken/$lt"
info=$(LD_LIBRARY_PATH="$tmp/broken" "$build/tern" info)
expect "$info" "found at $tmp/broken/libtern_cuda.so but cannot be opened: .*$lt" \
  "tern info with $lt broken"
expect "$info" "cuda built=1 available=0 devices=0" "tern info with $lt broken"
got=$(LD_LIBRARY_PATH="$tmp/broken" "$tmp/absent/run_model" "${model[@]}")
[ "$got" = "$want" ] || fail "the C sample printed something else with $lt broken"
run=$(LD_LIBRARY_PATH="$tmp/broken" "$build/tern" run "${model[0]}" --backends cuda 2>&1) &&
  fail "a cuda session was created with $lt broken"
expect "$run" "cannot be opened: .*$lt" "cuda session with $lt broken"
echo "ok: with $lt broken, the queries and the refusal name it"
echo "cuda module test passed"
