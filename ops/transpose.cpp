// Transpose: permutes axes (default: reverses them); any non-string dtype.
#include <cstring>
#include <numeric>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct TransposeParams {
  std::vector<int64_t> perm;
  Shape in, out;
  size_t esize = 0;
  DType dtype = DType::kUndefined;
};

Expected<TransposeParams> parse_transpose(const OpContext& ctx) {
  TransposeParams p;
  p.in = ctx.inputs[0].shape;
  const int64_t r = static_cast<int64_t>(p.in.size());
  std::vector<int64_t> reversed(static_cast<size_t>(r));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  TERN_ASSIGN_OR_RETURN(p.perm, ctx.attrs().get_ints("perm", reversed));
  if (static_cast<int64_t>(p.perm.size()) != r) {
    return invalid_model("perm has ", p.perm.size(), " entries for a rank-", r, " input");
  }
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int64_t& a : p.perm) {
    TERN_ASSIGN_OR_RETURN(a, ops::normalize_axis(a, r, "perm entry"));
    if (seen[static_cast<size_t>(a)]) return invalid_model("perm repeats axis ", a);
    seen[static_cast<size_t>(a)] = true;
  }
  for (int64_t a : p.perm) p.out.push_back(p.in[static_cast<size_t>(a)]);
  p.esize = dtype_size(ctx.inputs[0].dtype);
  p.dtype = ctx.inputs[0].dtype;
  if (p.esize == 0) return ops::dtype_error(ctx, 0, "any non-string type");
  return p;
}

Status infer_transpose(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(TransposeParams p, parse_transpose(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, p.out);
  return Status::ok();
}

template <class T>
void strided_copy(const T* in, int64_t stride, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i * stride];
}

Status run_transpose(const TransposeParams& p, const KernelArgs& a, const ExecContext& exec) {
  const size_t r = p.in.size();
  if (r == 0) {
    std::memcpy(a.outputs[0]->raw(), a.inputs[0]->raw(), p.esize);
    return Status::ok();
  }
  std::vector<int64_t> in_strides(r, 1);
  for (size_t d = r - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * p.in[d];
  // Output axis d walks input axis perm[d].
  std::vector<int64_t> step(r);
  for (size_t d = 0; d < r; ++d) step[d] = in_strides[static_cast<size_t>(p.perm[d])];
  const int64_t inner = p.out[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= p.out[d];
  const auto* src = static_cast<const uint8_t*>(a.inputs[0]->raw());
  auto* dst = static_cast<uint8_t*>(a.outputs[0]->raw());
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), exec.num_threads,
               [&](int64_t r0, int64_t r1) {
                 for (int64_t row = r0; row < r1; ++row) {
                   int64_t rem = row, off = 0;
                   for (size_t d = r - 1; d-- > 0;) {
                     off += (rem % p.out[d]) * step[d];
                     rem /= p.out[d];
                   }
                   uint8_t* o = dst + static_cast<size_t>(row * inner) * p.esize;
                   const uint8_t* in = src + static_cast<size_t>(off) * p.esize;
                   const int64_t s = step[r - 1];
                   if (s == 1) {  // the last axis stays last: one contiguous run
                     std::memcpy(o, in, static_cast<size_t>(inner) * p.esize);
                     continue;
                   }
                   const bool sized = ops::visit_by_size(p.dtype, [&](auto tag) {
                     using T = decltype(tag);
                     strided_copy(reinterpret_cast<const T*>(in), s, inner, reinterpret_cast<T*>(o));
                   });
                   if (!sized) {
                     for (int64_t i = 0; i < inner; ++i) {
                       std::memcpy(o + static_cast<size_t>(i) * p.esize,
                                   in + static_cast<size_t>(i * s) * p.esize, p.esize);
                     }
                   }
                 }
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_transpose(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(TransposeParams p, parse_transpose(ctx));
  return make_kernel("reference", std::move(p), run_transpose);
}

}  // namespace

TERN_REGISTRATION void register_op_transpose(OpRegistry& r) {
  r.add({"Transpose", 1, 1, 1, 1, infer_transpose, make_transpose, {}, attrs("perm")});
}

}  // namespace tern
