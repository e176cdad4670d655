// The unit tests' main: doctest's, with adaptive threads off unless the environment says otherwise.
// "cpu.adaptive_threads" changes a session's thread count while other processes keep the CPUs
// busy, as ctest -j, the sanitizer runs and CI's neighbours do: a second plan at the other count,
// results rounded as that count's kernels round. The tests count plans and compare runs bitwise,
// so they run at the count they ask for. The tuner's own tests (thread_budget_test.cpp) feed it
// CPU readings of their own; tests/bench/contention measures it on real contention. The `tern`
// processes the CLI tests start inherit the setting.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("TERN_ADAPTIVE_THREADS", "0", /*overwrite=*/0);  // read when the flags are first made
  doctest::Context context(argc, argv);
  return context.run();
}
