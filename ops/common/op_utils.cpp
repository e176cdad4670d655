#include "ops/common/op_utils.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace tern::ops {

Expected<int64_t> normalize_axis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    return invalid_model(what, " ", axis, " is out of range for rank ", rank);
  }
  return axis < 0 ? axis + rank : axis;
}

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) {
      return invalid_argument("shapes ", shape_str(a), " and ", shape_str(b),
                              " cannot be broadcast (dim ", i, ": ", da, " vs ", db, ")");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void copy_elements(DType dt, const void* src, int64_t src_index, void* dst, int64_t dst_index,
                   int64_t n) {
  if (n <= 0) return;
  if (dt == DType::kString) {
    const auto* s = static_cast<const std::string*>(src) + src_index;
    std::copy(s, s + n, static_cast<std::string*>(dst) + dst_index);
    return;
  }
  const size_t es = dtype_size(dt);
  std::memmove(static_cast<uint8_t*>(dst) + static_cast<size_t>(dst_index) * es,
               static_cast<const uint8_t*>(src) + static_cast<size_t>(src_index) * es,
               static_cast<size_t>(n) * es);
}

std::vector<float> to_float32(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(t.float_at(i));
  return v;
}

void from_float32(const std::vector<float>& v, Tensor& t) {
  visit_any_float(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = from_double<T>(v[i]);
  });
}

Expected<std::vector<int64_t>> input_ints(const OpContext& ctx, size_t i) {
  if (!ctx.has_input(i) || !ctx.inputs[i].value) {
    return invalid_model(ctx.where, ": input ", i, " has no known value");
  }
  return read_ints(*ctx.inputs[i].value);
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

std::vector<int64_t> read_ints(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.int_at(i);
  return v;
}

Tensor make_int64_tensor(const std::vector<int64_t>& v, Shape shape) {
  Tensor t = Tensor::allocate(DType::kInt64, std::move(shape)).value();
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

void BroadcastRows::row_offsets(int64_t r, int64_t* offsets) const {
  for (size_t k = 0; k < in_strides.size(); ++k) offsets[k] = 0;
  for (size_t d = out_dims.size() - 1; d-- > 0;) {
    int64_t idx = r % out_dims[d];
    r /= out_dims[d];
    for (size_t k = 0; k < in_strides.size(); ++k) offsets[k] += idx * in_strides[k][d];
  }
}

BroadcastRows plan_broadcast(const Shape& out, const std::vector<Shape>& ins) {
  const size_t r = out.size();
  // Per input: its dims aligned to the output's rank.
  std::vector<Shape> aligned;
  for (const Shape& s : ins) {
    Shape a(r, 1);
    for (size_t i = 0; i < s.size(); ++i) a[r - s.size() + i] = s[i];
    aligned.push_back(a);
  }
  // Merge dim i into the previous group when every input is either full or broadcast on both.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> in_dims(ins.size());
  for (size_t i = 0; i < r; ++i) {
    bool merge = !dims.empty();
    for (size_t k = 0; merge && k < ins.size(); ++k) {
      bool prev_full = in_dims[k].back() == dims.back();
      bool prev_bcast = in_dims[k].back() == 1;
      bool cur_full = aligned[k][i] == out[i];
      bool cur_bcast = aligned[k][i] == 1;
      merge = (prev_full && cur_full) || (prev_bcast && cur_bcast);
    }
    if (merge) {
      dims.back() *= out[i];
      for (size_t k = 0; k < ins.size(); ++k) in_dims[k].back() *= aligned[k][i];
    } else {
      dims.push_back(out[i]);
      for (size_t k = 0; k < ins.size(); ++k) in_dims[k].push_back(aligned[k][i]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (auto& d : in_dims) d.push_back(1);
  }
  BroadcastRows b;
  b.out_dims = dims;
  b.inner = dims.back();
  b.rows = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) b.rows *= dims[i];
  for (size_t k = 0; k < ins.size(); ++k) {
    std::vector<int64_t> strides(dims.size());
    int64_t s = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      strides[d] = in_dims[k][d] == 1 && dims[d] != 1 ? 0 : s;
      s *= in_dims[k][d];
    }
    b.in_strides.push_back(strides);
  }
  return b;
}

Status dtype_error(const OpContext& ctx, size_t input, const char* allowed) {
  return unsupported("input ", input, " '", ctx.input_names[input], "' has dtype ",
                     dtype_name(ctx.inputs[input].dtype), "; supported: ", allowed);
}

Status require_f32_or_half(const OpContext& ctx, size_t input, bool any_float) {
  const DType dt = ctx.inputs[input].dtype;
  if (dt == DType::kFloat32) return Status::ok();
  if (any_float && (dt == DType::kFloat16 || dt == DType::kBFloat16)) return Status::ok();
  return dtype_error(ctx, input, any_float ? "float32, float16, bfloat16" : "float32");
}

Status require_same_dtype(const OpContext& ctx, size_t a, size_t b) {
  if (ctx.inputs[a].dtype == ctx.inputs[b].dtype) return Status::ok();
  return invalid_model("inputs '", ctx.input_names[a], "' (", dtype_name(ctx.inputs[a].dtype),
                       ") and '", ctx.input_names[b], "' (", dtype_name(ctx.inputs[b].dtype),
                       ") must have the same dtype");
}

Status require_plain_layout(const OpContext& ctx) {
  for (const auto* list : {&ctx.inputs, &ctx.outputs}) {
    for (const TensorInfo& t : *list) {
      if (t.block != 0) {
        return unsupported("this kernel reads plain layouts only, not channels blocked by ",
                           t.block);
      }
    }
  }
  return Status::ok();
}

std::unique_ptr<Kernel> make_bytes_copy() {
  return make_elementwise_kernel("copy", 0, [](int, const KernelArgs& a, const ExecContext&) {
    const size_t n = a.inputs[0]->byte_size();
    if (n && a.outputs[0]->raw() != a.inputs[0]->raw()) {
      std::memcpy(a.outputs[0]->raw(), a.inputs[0]->raw(), n);
    }
    return Status::ok();
  });
}

}  // namespace tern::ops
