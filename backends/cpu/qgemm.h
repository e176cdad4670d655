// Tern's int8 GEMM, for the int8 kernels of builds without oneDNN (the minimal aarch64 build):
// C = requantise(L x R + bias), L and R int8, int32 sums.
//
// L is row-major, its rows padded to a multiple of kDepth values (the padding multiplies zeros
// of R). R is packed into panels of kPanel columns in the layout of Arm's dot-product
// instructions: four consecutive k of one column in each 32-bit lane, so one SDOT adds four
// products into each of four columns (layout in pack_index). Both operands are signed: callers
// turn uint8 activations into int8 by flipping the top bit (x - 128) and weights into int8 by
// subtracting their zero point, and fold what that changes into `bias` (exact integer
// arithmetic; see the kernels in backends/cpu/kernels/qlinear_*.cpp).
//
// The requantisation of each sum, the same on every path so they agree bit for bit:
//   a = acc + bias (int32, wrapping: callers bound the true sum within int32),
//   v = clamp(float(a) * scale, lo, hi), q = round_half_even(v) + zero,
// with bias and scale one per row or one per column, and [lo, hi] the output type's range less
// the zero point (Relu raises lo to 0). With out_i32 (ConvInteger) C is int32 and takes
// acc + bias itself, no requantisation.
//
// Paths: portable C++ (any CPU), and on aarch64 SDOT (vdotq_laneq_s32) in 4x16 tiles, chosen
// at run time when the CPU has the dot-product instructions (cpu_features().neon_dotprod).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/kernel.h"

namespace tern::qgemm {

constexpr int64_t kPanel = 16;  // columns per panel of R
constexpr int64_t kDepth = 16;  // K is padded to a multiple of this in L's rows and R's panels

inline int64_t padded_depth(int64_t k) {
  return (k + kDepth - 1) / kDepth * kDepth;
}
inline int64_t panels(int64_t n) {
  return (n + kPanel - 1) / kPanel;
}
// Bytes of R packed: whole panels of padded_depth(k) rows.
inline int64_t packed_bytes(int64_t k, int64_t n) {
  return panels(n) * padded_depth(k) * kPanel;
}
// Where R[k][n] lies in the packed bytes (kd = padded_depth(k)).
inline int64_t pack_index(int64_t k, int64_t n, int64_t kd) {
  return (n / kPanel) * kd * kPanel + (k / 4) * (4 * kPanel) + (n % kPanel) * 4 + k % 4;
}

enum class Path { kPortable, kNeonDot };
const char* path_name(Path p);  // "portable", "neon_dot"
// The fastest path the CPU has under cpu.max_capability `cap` (its enum value): on aarch64 the
// dot-product path for auto (or SVE256), the portable one when the cap names DEFAULT or another
// architecture's ISA.
Path best_path(int64_t cap);
// Every path this CPU can run (for tests).
std::vector<Path> available_paths();

struct Epilogue {
  const int32_t* bias = nullptr;  // per row or per column (per_row), never null
  const float* scale = nullptr;   // likewise
  bool per_row = false;
  int32_t zero = 0;      // output zero point
  float lo = 0, hi = 0;  // the output range less `zero`
  bool out_u8 = false;   // uint8 output, else int8
  bool out_i32 = false;  // int32 output acc + bias (scale, zero, lo, hi unused)
};

// An epilogue writing `y` (int8 or uint8) with zero point `zero`, Relu'd or not; bias and scale
// still to set.
Epilogue output_epilogue(const Tensor& y_zero_point, bool per_row, bool relu);

// The requantisation above, for one sum (the portable path's, and the reference for others).
int32_t requantise(int32_t acc, int32_t bias, float scale, const Epilogue& e);

// Element `at` of C (of the epilogue's output type) from one sum: requantised, or for out_i32
// acc + bias (wrapping, as requantise adds).
inline void store(void* c, int64_t at, int32_t acc, int32_t bias, float scale, const Epilogue& e) {
  if (e.out_i32) {
    static_cast<int32_t*>(c)[at] =
        static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(bias));
  } else {
    static_cast<uint8_t*>(c)[at] = static_cast<uint8_t>(requantise(acc, bias, scale, e));
  }
}

// The int32 output of one tile row (out_i32): acc[0, cols) + bias into row `row` of C from
// column col0.
inline void store_int32_row(const int32_t* acc, int cols, int64_t row, int64_t col0, void* c,
                            int64_t ldc, const Epilogue& e) {
  for (int j = 0; j < cols; ++j) {
    store(c, row * ldc + col0 + j, acc[j], e.bias[e.per_row ? row : col0 + j], 0.0f, e);
  }
}

// R[i][j] = value(i, j) (an int8) for i < k, j < n, packed (padding zero); out holds
// packed_bytes(k, n).
template <class Value>
void pack(int64_t k, int64_t n, Value value, int8_t* out) {
  const int64_t kd = padded_depth(k);
  std::memset(out, 0, static_cast<size_t>(packed_bytes(k, n)));
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) out[pack_index(i, j, kd)] = static_cast<int8_t>(value(i, j));
  }
}

// Rows [r0, r1) of C = L x R over R's panels [p0, p1), requantised into C (int8 / uint8, or
// int32 for out_i32; row stride ldc elements); n: R's columns (the last panel's past it are not
// stored); kd: the padded depth; ldl: L's row stride (>= kd).
void multiply(Path path, const int8_t* l, int64_t ldl, const int8_t* r, int64_t kd, int64_t n,
              void* c, int64_t ldc, const Epilogue& e, int64_t r0, int64_t r1, int64_t p0,
              int64_t p1);
// All of C ([m, n]) on up to num_threads threads.
void multiply_all(Path path, const int8_t* l, int64_t ldl, const int8_t* r, int64_t kd, int64_t m,
                  int64_t n, void* c, int64_t ldc, const Epilogue& e, int num_threads);

// A kernel whose constant input (the weights) is packed for the GEMM: the model file's copy
// when it carries one, else the session's (shared by its plans), else one of the kernel's own.
class PackedWeightsKernel : public Kernel {
 public:
  size_t packed_bytes() const override { return own_copy_ ? blob_.data.byte_size() : 0; }
  std::vector<PackedWeight> packed_weights() const override {
    if (!shared_) return {};
    return {PackedWeight{input_, blob_}};
  }

 protected:
  // Packs input `i` of ctx as `key` (`bytes` long): `fill` writes it into zeroed memory. Not
  // `shared`: always the kernel's own (bytes the key alone does not name, e.g. weights less
  // non-zero zero points).
  Status pack_weights(const OpContext& ctx, size_t i, const std::string& key, size_t bytes,
                      bool shared, const std::function<void(int8_t*)>& fill);
  const int8_t* w_ = nullptr;  // the packed bytes

 private:
  PackedData blob_;
  size_t input_ = 0;
  bool own_copy_ = false, shared_ = false;
};

// The aarch64 tile (qgemm_neon.cpp): rows l[0..3] (rows past `rows` repeat the last) x one panel.
void neon_dot_tile(const int8_t* const* l, const int8_t* panel, int64_t kd, int rows, int cols,
                   int64_t row0, int64_t col0, void* c, int64_t ldc, const Epilogue& e);

}  // namespace tern::qgemm
