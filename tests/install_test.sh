#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then samples/c built against the installed tree four
# ways: CMake find_package(Tern CONFIG) with Tern::tern and Tern::tern_static, pkg-config with the
# shared library and with the static archive; samples/cpp (the C++ wrapper, include/tern/tern.hpp)
# with find_package and with pkg-config. Each program runs a model and must print the same.
# Usage: install_test.sh BUILD_DIR [MODEL ARGS...]
set -euo pipefail
# Runs at the thread count asked for (as the unit tests: tests/test_main.cpp): the outputs of
# separate processes are compared bitwise, and adaptive threads would move one to 1 thread
# while other processes keep the CPUs busy.
export TERN_ADAPTIVE_THREADS="${TERN_ADAPTIVE_THREADS:-0}"
build="$(cd "$1" && pwd)"
shift
src="$(cd "$(dirname "$0")/.." && pwd)"
model=("$@")
[ ${#model[@]} -gt 0 ] || model=("$src/tests/fuzz/corpus/tern_loader/matmul.tern" 2)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
libdir=$(find "$prefix" -name libtern.a -printf '%h\n')
for f in include/tern/c_api.h include/tern/tern.hpp; do
  [ -f "$prefix/$f" ] || { echo "missing $prefix/$f"; exit 1; }
done
for f in libtern.a libtern.so cmake/Tern/TernConfig.cmake cmake/Tern/TernConfigVersion.cmake \
         pkgconfig/tern.pc; do
  [ -e "$libdir/$f" ] || { echo "missing $libdir/$f"; exit 1; }
done
# The CUDA module is installed beside libtern when the build made one.
cuda=0
if [ -f "$build/libtern_cuda.so" ]; then
  cuda=1
  [ -f "$libdir/libtern_cuda.so" ] || { echo "missing $libdir/libtern_cuda.so"; exit 1; }
fi
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

# The installed tree may move: the package files find it relative to themselves.
mv "$prefix" "$tmp/moved"
prefix="$tmp/moved"
libdir="${libdir/$tmp\/prefix/$prefix}"

outputs=()
run() {  # NAME PROGRAM: runs it on the model, keeps its output
  local out
  out=$("$2" "${model[@]}")
  echo "$1: $(echo "$out" | tail -n +2 | head -c 300)"
  outputs+=("$out")
}
for kind in shared static; do
  static=OFF
  [ "$kind" = static ] && static=ON
  cmake -S "$src/samples/c" -B "$tmp/cmake-$kind" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" -DTERN_SAMPLE_STATIC=$static > "$tmp/cmake-$kind.log"
  cmake --build "$tmp/cmake-$kind" > "$tmp/build-$kind.log"
  run "cmake find_package, Tern::tern$([ $kind = static ] && echo _static)" "$tmp/cmake-$kind/run_model"
  # The package names the module where it is.
  if [ $cuda = 1 ]; then
    grep -q "CUDA module: $libdir/libtern_cuda.so" "$tmp/cmake-$kind.log" ||
      { echo "Tern_CUDA_MODULE is not $libdir/libtern_cuda.so"; exit 1; }
  fi
done
# The C++ sample: the header-only wrapper over the same library, printing what the C sample prints.
cmake -S "$src/samples/cpp" -B "$tmp/cmake-cpp" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cmake-cpp.log"
cmake --build "$tmp/cmake-cpp" > "$tmp/build-cpp.log"
run "C++ sample, cmake find_package, Tern::tern" "$tmp/cmake-cpp/run_model_cpp"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
c++ -std=c++17 -Wall -Wextra -Werror -pedantic "$src/samples/cpp/run_model.cpp" -o "$tmp/pc-cpp" \
   $(pkg-config --cflags --libs tern) -Wl,-rpath,"$(pkg-config --variable=libdir tern)"
run "C++ sample, pkg-config tern" "$tmp/pc-cpp"
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/samples/c/run_model.c" -o "$tmp/pc-shared" \
   $(pkg-config --cflags --libs tern) -Wl,-rpath,"$(pkg-config --variable=libdir tern)"
run "pkg-config tern" "$tmp/pc-shared"
# Static: the archive in place of -ltern, and the libraries it needs from --static.
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/samples/c/run_model.c" -o "$tmp/pc-static" \
   $(pkg-config --cflags tern) "$(pkg-config --variable=libdir tern)/libtern.a" \
   $(pkg-config --static --libs-only-other --libs-only-l tern | sed 's/\(^\| \)-ltern\( \|$\)/ /')
run "pkg-config --static tern" "$tmp/pc-static"

# The moved tree's programs find its CUDA module: tern (libtern.so beside it) and a program linked
# with libtern.a whose runpath has the library directory.
if [ $cuda = 1 ]; then
  "$prefix/bin/tern" info | grep -q "module $libdir/libtern_cuda.so (loaded" ||
    { "$prefix/bin/tern" info | grep CUDA; echo "the installed tern does not load the installed module"; exit 1; }
  printf '#include <stdio.h>\n#include "c_api.h"\nint main(void) { printf("%%d\\n", tern_cuda_is_built()); return 0; }\n' \
    > "$tmp/cuda_built.c"
  cc -std=c99 "$tmp/cuda_built.c" -o "$tmp/cuda_built" $(pkg-config --cflags tern) \
     "$(pkg-config --variable=libdir tern)/libtern.a" \
     $(pkg-config --static --libs-only-other --libs-only-l tern | sed 's/\(^\| \)-ltern\( \|$\)/ /') \
     -Wl,-rpath,"$(pkg-config --variable=libdir tern)"
  [ "$("$tmp/cuda_built")" = 1 ] || { echo "a static program does not find the installed module"; exit 1; }
  echo "installed CUDA module: found by tern (beside libtern.so) and by a static program (runpath)"
fi

# The static programs must not need libtern.so; the shared ones must.
for p in cmake-static/run_model pc-static; do
  if readelf -d "$tmp/$p" | grep -q 'libtern\.so'; then echo "$p links libtern.so"; exit 1; fi
done
for p in cmake-shared/run_model pc-shared; do
  readelf -d "$tmp/$p" | grep -q 'NEEDED.*libtern\.so' || { echo "$p does not link libtern.so"; exit 1; }
done
for o in "${outputs[@]}"; do
  [ "$o" = "${outputs[0]}" ] || { echo "the programs printed different outputs"; exit 1; }
done
echo "install test passed: 6 programs (C: CMake shared/static, pkg-config shared/static; C++: CMake,"
echo "pkg-config), same outputs"
