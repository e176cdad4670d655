# Cross build for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu; tests run under
# qemu-aarch64-static (qemu-user-static), which ctest and the CLI tests use as the emulator.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DTERN_MINIMAL=ON
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # flatc runs on the build machine
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)    # never link an x86 library
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)    # header-only FlatBuffers and doctest from /usr/include
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
find_program(TERN_QEMU_AARCH64 qemu-aarch64-static)
if(TERN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TERN_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
