#include "backends/cuda/ops/cuda_ops.h"

namespace tern::cuda {

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

Expected<Broadcast> make_broadcast(const Shape& a, const Shape& b, const Shape& y) {
  Broadcast d;
  if (y.size() > static_cast<size_t>(kMaxDims)) {
    return unsupported("rank ", y.size(), " past the CUDA kernels' ", kMaxDims);
  }
  d.same = a == y && b == y;
  d.rank = static_cast<int>(y.size());
  const Shape sa = contiguous_strides(a), sb = contiguous_strides(b);
  for (size_t k = 0; k < y.size(); ++k) {
    d.shape[k] = y[k];
    const size_t ra = y.size() - k, rb = y.size() - k;  // dims from the right
    if (ra <= a.size()) {
      const size_t ia = a.size() - ra;
      d.a[k] = a[ia] == 1 ? 0 : sa[ia];
    }
    if (rb <= b.size()) {
      const size_t ib = b.size() - rb;
      d.b[k] = b[ib] == 1 ? 0 : sb[ib];
    }
  }
  return d;
}

Expected<Strided> make_strided(const Shape& out, const Shape& strides, int64_t offset) {
  if (out.size() > static_cast<size_t>(kMaxDims)) {
    return unsupported("rank ", out.size(), " past the CUDA kernels' ", kMaxDims);
  }
  Strided d;
  d.rank = static_cast<int>(out.size());
  d.offset = offset;
  for (size_t k = 0; k < out.size(); ++k) {
    d.shape[k] = out[k];
    d.strides[k] = strides[k];
  }
  return d;
}

Expected<Elem> elem_for(const OpContext& ctx, DType t, const char* what) {
  Elem e;
  if (!elem_of(t, &e))
    return unsupported(ctx.where, ": no CUDA ", what, " kernel for ", dtype_name(t));
  return e;
}

Expected<float> constant_scalar(const OpContext& ctx, size_t i) {
  const TensorInfo& in = ctx.inputs[i];
  if (!in.value || in.value->numel() != 1) {
    return unsupported(ctx.where, ": input ", i, " must be a constant scalar on CUDA");
  }
  return static_cast<float>(in.value->float_at(0));
}

}  // namespace tern::cuda
