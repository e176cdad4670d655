// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL1 and ReduceL2 on float32
// over one contiguous run of dims: the input as [outer, r, inner]. With inner 1 each output is
// one contiguous row reduced in 16 float lanes; otherwise each output row of `inner` elements
// accumulates the r input rows in turn (contiguous, vectorised loops). Max and Min propagate NaN
// as the reference does. Float accumulation (the reference accumulates in double): the sums
// differ from it in the last bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/reduce.h"

namespace tern {
namespace {

enum class Red { kSum, kMean, kMax, kMin, kSumSquare, kL1, kL2 };

struct ReduceRowsKernel {
  Red op = Red::kSum;
  ops::ReduceRows rows;
};

// What one element adds (before the sum) and how accumulators combine.
template <Red Op>
inline float term(float v) {
  if constexpr (Op == Red::kSumSquare || Op == Red::kL2) return v * v;
  if constexpr (Op == Red::kL1) return std::fabs(v);
  return v;
}
template <Red Op>
inline float combine(float acc, float v) {
  if constexpr (Op == Red::kMax) return (v > acc || v != v) ? v : acc;
  if constexpr (Op == Red::kMin) return (v < acc || v != v) ? v : acc;
  return acc + term<Op>(v);
}
template <Red Op>
inline float finish(float acc, int64_t r) {
  if constexpr (Op == Red::kMean) return acc / static_cast<float>(r);
  if constexpr (Op == Red::kL2) return std::sqrt(acc);
  return acc;
}

constexpr int kLanes = 16;

template <Red Op>
float reduce_row(const float* x, int64_t r) {
  constexpr bool extremum = Op == Red::kMax || Op == Red::kMin;
  if (r == 0) {
    if constexpr (Op == Red::kMax) return -INFINITY;
    if constexpr (Op == Red::kMin) return INFINITY;
    return 0.0f;
  }
  float lanes[kLanes];
  int64_t i = 0;
  if (r >= kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] = extremum ? x[j] : term<Op>(x[j]);
    for (i = kLanes; i + kLanes <= r; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] = combine<Op>(lanes[j], x[i + j]);
    }
  } else {
    for (int j = 0; j < kLanes; ++j) lanes[j] = extremum ? x[0] : 0.0f;
  }
  float acc = lanes[0];
  for (int j = 1; j < kLanes; ++j) {
    acc = extremum ? combine<Op>(acc, lanes[j]) : acc + lanes[j];
  }
  for (; i < r; ++i) acc = combine<Op>(acc, x[i]);
  return acc;
}

template <Red Op>
void run_typed(const ops::ReduceRows& s, const float* x, float* y, int threads) {
  constexpr bool extremum = Op == Red::kMax || Op == Red::kMin;
  if (s.inner == 1) {
    parallel_for(s.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.r, 1)), threads,
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b; o < e; ++o) {
                     y[o] = finish<Op>(reduce_row<Op>(x + o * s.r, s.r), s.r);
                   }
                 });
    return;
  }
  // Work items: pieces of output rows, each accumulating its r input pieces.
  constexpr int64_t kPiece = 1024;
  const int64_t pieces = (s.inner + kPiece - 1) / kPiece;
  parallel_for(s.outer * pieces, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.r * kPiece, 1)),
               threads, [&](int64_t b, int64_t e) {
                 for (int64_t item = b; item < e; ++item) {
                   const int64_t o = item / pieces, c0 = (item % pieces) * kPiece;
                   const int64_t n = std::min(kPiece, s.inner - c0);
                   const float* in = x + o * s.r * s.inner + c0;
                   float* out = y + o * s.inner + c0;
                   if (s.r == 0) {
                     for (int64_t c = 0; c < n; ++c) out[c] = reduce_row<Op>(nullptr, 0);
                     continue;
                   }
                   for (int64_t c = 0; c < n; ++c) out[c] = extremum ? in[c] : term<Op>(in[c]);
                   for (int64_t k = 1; k < s.r; ++k) {
                     const float* row = in + k * s.inner;
                     for (int64_t c = 0; c < n; ++c) out[c] = combine<Op>(out[c], row[c]);
                   }
                   if constexpr (Op == Red::kMean || Op == Red::kL2) {
                     for (int64_t c = 0; c < n; ++c) out[c] = finish<Op>(out[c], s.r);
                   }
                 }
               });
}

Status run_reduce_rows(const ReduceRowsKernel& k, const KernelArgs& a, const ExecContext& exec) {
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const int t = exec.num_threads;
  switch (k.op) {
    case Red::kSum:
      run_typed<Red::kSum>(k.rows, x, y, t);
      break;
    case Red::kMean:
      run_typed<Red::kMean>(k.rows, x, y, t);
      break;
    case Red::kMax:
      run_typed<Red::kMax>(k.rows, x, y, t);
      break;
    case Red::kMin:
      run_typed<Red::kMin>(k.rows, x, y, t);
      break;
    case Red::kSumSquare:
      run_typed<Red::kSumSquare>(k.rows, x, y, t);
      break;
    case Red::kL1:
      run_typed<Red::kL1>(k.rows, x, y, t);
      break;
    case Red::kL2:
      run_typed<Red::kL2>(k.rows, x, y, t);
      break;
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_reduce_rows(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::ReduceSpec spec, ops::reduce_spec(ctx));
  if (spec.identity) return unsupported("reduce_rows: no axes (a copy)");
  const std::string& op = ctx.node->op_type;
  ReduceRowsKernel k;
  if (op == "ReduceSum")
    k.op = Red::kSum;
  else if (op == "ReduceMean")
    k.op = Red::kMean;
  else if (op == "ReduceMax")
    k.op = Red::kMax;
  else if (op == "ReduceMin")
    k.op = Red::kMin;
  else if (op == "ReduceSumSquare")
    k.op = Red::kSumSquare;
  else if (op == "ReduceL1")
    k.op = Red::kL1;
  else if (op == "ReduceL2")
    k.op = Red::kL2;
  else
    return unsupported("reduce_rows: ", op);
  if (k.op == Red::kMean && numel(ctx.inputs[0].shape) == 0) {
    return unsupported("reduce_rows: empty ReduceMean (NaN by the reference)");
  }
  TERN_ASSIGN_OR_RETURN(k.rows, ops::reduce_rows(ctx.inputs[0].shape, spec));
  return make_kernel("reduce_rows", k, run_reduce_rows);
}

}  // namespace

TERN_REGISTRATION void register_cpu_reduce_rows(KernelRegistry& r) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare",
                         "ReduceL1", "ReduceL2"}) {
    r.add(op, "cpu", DType::kFloat32, make_reduce_rows);
  }
}

}  // namespace tern
