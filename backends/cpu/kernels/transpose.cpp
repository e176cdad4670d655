// Transpose on the CPU, any dtype of 1, 2, 4 or 8 bytes. Axes of size 1 are dropped and output
// axes whose input axes stay adjacent are merged, so the attention layouts ([B, S, H, D] <->
// [B, H, S, D]) become a copy of D-element rows and a 2-D transpose becomes one gather. Each work
// item walks its rows with a running offset (no division per row); rows that are contiguous in
// the input are copied whole.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct TransposePlan {
  std::vector<int64_t> dims;     // merged output dims, the last one the row
  std::vector<int64_t> strides;  // input element stride of each merged output dim
  size_t esize = 0;
  int64_t rows = 1;
};

Expected<TransposePlan> plan_transpose(const OpContext& ctx) {
  const Shape& in = ctx.inputs[0].shape;
  const int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> reversed(static_cast<size_t>(r));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  TERN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.attrs().get_ints("perm", reversed));
  if (static_cast<int64_t>(perm.size()) != r) return unsupported("bad perm");
  std::vector<int64_t> in_strides(static_cast<size_t>(r), 1);
  for (int64_t d = r - 1; d > 0; --d)
    in_strides[static_cast<size_t>(d - 1)] =
        in_strides[static_cast<size_t>(d)] * in[static_cast<size_t>(d)];
  TransposePlan p;
  p.esize = dtype_size(ctx.inputs[0].dtype);
  int prev = -2;
  for (int64_t d = 0; d < r; ++d) {
    TERN_ASSIGN_OR_RETURN(int64_t a, ops::normalize_axis(perm[static_cast<size_t>(d)], r));
    const int64_t size = in[static_cast<size_t>(a)];
    if (size == 1) continue;
    if (!p.dims.empty() && a == prev + 1) {  // the input axis follows the previous one: merge
      p.dims.back() *= size;
      p.strides.back() = in_strides[static_cast<size_t>(a)];
    } else {
      p.dims.push_back(size);
      p.strides.push_back(in_strides[static_cast<size_t>(a)]);
    }
    prev = static_cast<int>(a);
  }
  if (p.dims.empty()) {
    p.dims = {1};
    p.strides = {1};
  }
  for (size_t d = 0; d + 1 < p.dims.size(); ++d) p.rows *= p.dims[d];
  return p;
}

template <class T>
void gather(const T* in, int64_t stride, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i * stride];
}

Status run_transpose(const TransposePlan& p, const KernelArgs& a, const ExecContext& exec) {
  const auto* src = static_cast<const uint8_t*>(a.inputs[0]->raw());
  auto* dst = static_cast<uint8_t*>(a.outputs[0]->raw());
  const size_t outer = p.dims.size() - 1;
  const int64_t inner = p.dims.back(), step = p.strides.back();
  if (a.outputs[0]->numel() == 0) return Status::ok();
  parallel_for(p.rows, std::max<int64_t>(1, 16384 / inner), exec.num_threads,
               [&](int64_t r0, int64_t r1) {
                 // The running position of row r0 in the outer dims, and its input offset.
                 std::vector<int64_t> pos(outer, 0);
                 int64_t off = 0;
                 for (int64_t rem = r0, d = static_cast<int64_t>(outer) - 1; d >= 0; --d) {
                   pos[static_cast<size_t>(d)] = rem % p.dims[static_cast<size_t>(d)];
                   rem /= p.dims[static_cast<size_t>(d)];
                   off += pos[static_cast<size_t>(d)] * p.strides[static_cast<size_t>(d)];
                 }
                 for (int64_t row = r0; row < r1; ++row) {
                   uint8_t* o = dst + static_cast<size_t>(row * inner) * p.esize;
                   const uint8_t* in = src + static_cast<size_t>(off) * p.esize;
                   if (step == 1) {
                     std::memcpy(o, in, static_cast<size_t>(inner) * p.esize);
                   } else if (p.esize == 4) {
                     gather(reinterpret_cast<const uint32_t*>(in), step, inner,
                            reinterpret_cast<uint32_t*>(o));
                   } else if (p.esize == 8) {
                     gather(reinterpret_cast<const uint64_t*>(in), step, inner,
                            reinterpret_cast<uint64_t*>(o));
                   } else if (p.esize == 2) {
                     gather(reinterpret_cast<const uint16_t*>(in), step, inner,
                            reinterpret_cast<uint16_t*>(o));
                   } else {
                     gather(in, step, inner, o);
                   }
                   for (size_t d = outer; d-- > 0;) {  // next row
                     off += p.strides[d];
                     if (++pos[d] < p.dims[d]) break;
                     off -= pos[d] * p.strides[d];
                     pos[d] = 0;
                   }
                 }
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_transpose(const OpContext& ctx) {
  const size_t es = dtype_size(ctx.inputs[0].dtype);
  if (ctx.inputs[0].dtype == DType::kString || (es != 1 && es != 2 && es != 4 && es != 8)) {
    return unsupported("transpose_cpu: element size ", es);
  }
  if (ctx.inputs[0].block || ctx.outputs[0].block) return unsupported("plain layouts only");
  TERN_ASSIGN_OR_RETURN(TransposePlan p, plan_transpose(ctx));
  return make_kernel("transpose_cpu", std::move(p), run_transpose);
}

}  // namespace

void register_cpu_transpose(KernelRegistry& r) {
  r.add("Transpose", "cpu", DType::kUndefined, make_transpose);
}

}  // namespace tern
