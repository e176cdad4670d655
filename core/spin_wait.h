// Bounded spinning for Tern's own pools (core/thread_pool.h, core/intra_op_pool.h): an idle thread
// watches for work a few microseconds ("cpu.spin_us") before it blocks, so back-to-back work does
// not pay a wake-up each time, and an idle process goes quiet right after.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tern {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Calls done() until it returns true or `us` microseconds have passed; returns its last value.
template <class Done>
bool spin_for(int64_t us, Done&& done) {
  if (us <= 0) return done();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    for (int i = 0; i < 64; ++i) cpu_relax();
  }
  return true;
}

}  // namespace tern
