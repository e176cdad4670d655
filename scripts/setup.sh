#!/usr/bin/env bash
# Installs the Debian packages Tern's build and tests need. Idempotent: installs only what is
# missing, so a second run does nothing. Needs root (or sudo) when something is missing.
set -euo pipefail
# The list is read by tools too (../shared/hooks/install-deps-check): keep parentheses out of it.
packages=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev  # dnnl-config.cmake needs OpenCL, only a Recommends
  libflatbuffers-dev flatbuffers-compiler
  doctest-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libjpeg-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev  # ImageDecoder's formats
  clang libclang-rt-14-dev  # the sanitizer builds and the libFuzzer targets
  golang-go libjna-java openjdk-17-jdk-headless  # the Go and Java bindings
  g++-aarch64-linux-gnu qemu-user-static python3-onnx  # the aarch64 minimal build under qemu
  libvulkan-dev glslc mesa-vulkan-drivers  # the Vulkan backend; lavapipe runs its tests on the CPU
  python3-torch python3-torchvision python3-numpy  # tests/models: the model corpus and its check
  python3-setuptools python3-pip python3-pytest python3-dask python3-distributed  # bindings/python
)
# The model corpus' references come from ONNX Runtime, which npm installs: a machine whose Node.js
# already ships npm keeps it (Debian's npm conflicts with such builds).
command -v npm >/dev/null 2>&1 || packages+=(npm)
# Rust: a rustup toolchain in ~/.cargo/bin serves; else Debian's (the crate needs no newer one).
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  packages+=(cargo)
fi
# (--main-job and --bench, which once added npm and PyTorch, need nothing more: every run has them.)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
