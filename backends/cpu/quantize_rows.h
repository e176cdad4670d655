// Per-tensor 8-bit quantisation of whole tensors on the CPU (defined with the QuantizeLinear /
// DequantizeLinear kernels, backends/cpu/kernels/quantize_vec.cpp): x / scale in float32 rounded
// half to even, the zero point added, saturated (NaN to the type's lowest value), and
// (x - zero point) * scale back; loops compiled per x86 ISA level, on `threads` threads.
#pragma once

#include <cstdint>

#include "backends/cpu/vec/vec.h"
#include "core/dtype.h"

namespace tern {

// The spans of one ISA level. q_*(x, y, n, scale, zero, below, above): y = saturate(round(x /
// scale) + zero), `below` / `above` the type's range less the zero point; dq_*(x, y, n, scale,
// zero): y = (x - zero) * scale.
struct QuantizeRows {
  const char* isa;
  void (*q_u8)(const float*, uint8_t*, int64_t, float, float, float, float);
  void (*q_s8)(const float*, int8_t*, int64_t, float, float, float, float);
  void (*dq_u8)(const uint8_t*, float*, int64_t, float, float);
  void (*dq_s8)(const int8_t*, float*, int64_t, float, float);
};
// The rows of an ISA level (what cpu.max_capability leaves); `isa_name` of the level compiled.
const QuantizeRows& quantize_rows(CpuIsa isa);
const char* quantize_rows_isa(const QuantizeRows& rows);

// One span on the calling thread: float32 -> uint8 / int8 (`to`), and back (`from`).
void quantize_row(const QuantizeRows& rows, const float* x, void* y, DType to, int64_t n,
                  float scale, float zero);
void dequantize_row(const QuantizeRows& rows, const void* x, DType from, float* y, int64_t n,
                    float scale, float zero);
// float32 -> uint8 / int8 (`to`), and uint8 / int8 (`from`) -> float32, n elements.
void quantize_tensor(const QuantizeRows& rows, const float* x, void* y, DType to, int64_t n,
                     float scale, float zero, int threads);
void dequantize_tensor(const QuantizeRows& rows, const void* x, DType from, float* y, int64_t n,
                       float scale, float zero, int threads);

}  // namespace tern
