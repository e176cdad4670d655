// Split (sizes from the attribute before opset 13, an input since; num_outputs since 18), Pad
// (constant / reflect / edge / wrap, pads as attribute before opset 11, optional axes since 18),
// DepthToSpace (DCR / CRD), SpaceToDepth, ReverseSequence, TopK and Unique.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <type_traits>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

// ---- Split --------------------------------------------------------------------------------------

struct SplitParams {
  DType dtype;
  int64_t outer, dim, inner;
  std::vector<int64_t> sizes;
};

Expected<SplitParams> split_params(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  SplitParams p{ctx.inputs[0].dtype, 1, x[static_cast<size_t>(axis)], 1, {}};
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  const int64_t outs = static_cast<int64_t>(ctx.outputs.size());
  if (ctx.opset < 13) {
    TERN_ASSIGN_OR_RETURN(p.sizes, ctx.attrs().get_ints("split"));
  } else if (ctx.has_input(1)) {
    TERN_ASSIGN_OR_RETURN(p.sizes, ops::input_ints(ctx, 1));
  }
  if (p.sizes.empty()) {
    TERN_ASSIGN_OR_RETURN(int64_t num, ctx.attrs().get_int("num_outputs", outs));
    if (num != outs || num < 1) {
      return invalid_model(ctx.where, ": num_outputs ", num, " but ", outs, " outputs");
    }
    const int64_t chunk = (p.dim + num - 1) / num;  // the last chunk may be smaller (opset 18)
    for (int64_t i = 0; i < num; ++i) {
      p.sizes.push_back(std::max<int64_t>(0, std::min(chunk, p.dim - i * chunk)));
    }
  }
  if (static_cast<int64_t>(p.sizes.size()) != outs ||
      std::accumulate(p.sizes.begin(), p.sizes.end(), int64_t{0}) != p.dim) {
    return invalid_model(ctx.where, ": split sizes do not add up to dim ", p.dim, " over ", outs,
                         " outputs");
  }
  return p;
}

Status infer_split(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(SplitParams p, split_params(ctx));
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(
      axis, ops::normalize_axis(axis, static_cast<int64_t>(ctx.inputs[0].shape.size())));
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    Shape s = ctx.inputs[0].shape;
    s[static_cast<size_t>(axis)] = p.sizes[i];
    ctx.set_output(i, ctx.inputs[0].dtype, s);
  }
  return Status::ok();
}

Status run_split(const SplitParams& p, const KernelArgs& a, const ExecContext&) {
  int64_t start = 0;
  for (size_t k = 0; k < p.sizes.size(); ++k) {
    if (a.outputs[k]) {
      for (int64_t o = 0; o < p.outer; ++o) {
        ops::copy_elements(p.dtype, a.inputs[0]->raw(), (o * p.dim + start) * p.inner,
                           a.outputs[k]->raw(), o * p.sizes[k] * p.inner, p.sizes[k] * p.inner);
      }
    }
    start += p.sizes[k];
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_split(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(SplitParams p, split_params(ctx));
  return make_kernel("reference", std::move(p), run_split);
}

// ---- Pad ----------------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

struct PadParams {
  DType dtype;
  PadMode mode;
  Shape in, out;
  std::vector<int64_t> begin;  // per dim (may be negative: crop)
  // Before opset 11, constant mode pads with the `value` attribute (a float; Pad's type is a float
  // type there): a scalar of the data's type, undefined for zeros or the value input.
  Tensor attr_value;
};

Expected<PadParams> pad_params(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  const size_t r = x.size();
  PadParams p{ctx.inputs[0].dtype, PadMode::kConstant, x, x, std::vector<int64_t>(r, 0), Tensor()};
  TERN_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "constant"));
  if (mode == "reflect") {
    p.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    p.mode = PadMode::kEdge;
  } else if (mode == "wrap") {
    p.mode = PadMode::kWrap;
  } else if (mode != "constant") {
    return invalid_model(ctx.where, ": unknown mode '", mode, "'");
  }
  std::vector<int64_t> pads;
  if (ctx.opset < 11) {
    TERN_ASSIGN_OR_RETURN(pads, ctx.attrs().get_ints("pads"));
  } else {
    TERN_ASSIGN_OR_RETURN(pads, ops::input_ints(ctx, 1));
  }
  std::vector<int64_t> axes(r);
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.has_input(3)) {
    TERN_ASSIGN_OR_RETURN(axes, ops::input_ints(ctx, 3));
    for (int64_t& ax : axes) {
      TERN_ASSIGN_OR_RETURN(ax, ops::normalize_axis(ax, static_cast<int64_t>(r)));
    }
  }
  if (pads.size() != 2 * axes.size()) {
    return invalid_model(ctx.where, ": pads has ", pads.size(), " values for ", axes.size(),
                         " axes");
  }
  const size_t na = axes.size();
  for (size_t i = 0; i < na; ++i) {
    const size_t d = static_cast<size_t>(axes[i]);
    p.begin[d] = pads[i];
    p.out[d] = x[d] + pads[i] + pads[i + na];
    if (p.out[d] < 0) return invalid_model(ctx.where, ": pads make dim ", d, " negative");
    if (p.mode != PadMode::kConstant && x[d] == 0 && p.out[d] > 0) {
      return invalid_argument(ctx.where, ": cannot ", mode, "-pad an empty dim");
    }
  }
  return p;
}

Status infer_pad(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(PadParams p, pad_params(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, p.out);
  return Status::ok();
}

int64_t source_index(PadMode m, int64_t i, int64_t n) {
  if (i >= 0 && i < n) return i;
  switch (m) {
    case PadMode::kEdge:
      return i < 0 ? 0 : n - 1;
    case PadMode::kWrap:
      return ((i % n) + n) % n;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t k = ((i % period) + period) % period;
      return k < n ? k : period - k;
    }
    default:
      return -1;
  }
}

// Row by row of the last dim: a row whose leading indices fall outside the input is all padding;
// otherwise its inside part is one copy and the rest padding (constant) or single elements picked
// by source_index (edge, reflect, wrap). Rows are split among threads.
Status run_pad(const PadParams& p, const KernelArgs& a, const ExecContext& exec) {
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  const Tensor* cval = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  if (cval && cval->numel() == 0) cval = nullptr;
  if (!cval && p.attr_value.defined()) cval = &p.attr_value;
  const size_t r = p.out.size();
  if (numel(p.out) == 0) return Status::ok();
  if (r == 0) {
    ops::copy_elements(p.dtype, x.raw(), 0, y.raw(), 0, 1);
    return Status::ok();
  }
  const Shape xs = ops::contiguous_strides(p.in);
  const int64_t ow = p.out[r - 1], iw = p.in[r - 1], bw = p.begin[r - 1];
  const int64_t rows = numel(p.out) / ow;
  const bool strings = p.dtype == DType::kString;
  const size_t es = dtype_size(p.dtype);
  // The inside part of a row: output columns [c0, c1) read input columns from c0 - bw.
  const int64_t c0 = std::clamp<int64_t>(bw, 0, ow), c1 = std::clamp<int64_t>(bw + iw, c0, ow);
  auto fill = [&](int64_t o, int64_t n) {
    if (cval) {
      for (int64_t i = 0; i < n; ++i)
        ops::copy_elements(p.dtype, cval->raw(), 0, y.raw(), o + i, 1);
    } else if (!strings) {
      std::memset(static_cast<uint8_t*>(y.raw()) + o * static_cast<int64_t>(es), 0,
                  static_cast<size_t>(n) * es);
    }
  };
  parallel_for(rows, std::max<int64_t>(1, 4096 / ow), strings ? 1 : exec.num_threads,
               [&](int64_t b, int64_t e) {
                 for (int64_t row = b; row < e; ++row) {
                   int64_t off = 0, rem = row;
                   bool inside = true;
                   for (size_t d = r - 1; d-- > 0;) {
                     const int64_t pos = rem % p.out[d];
                     rem /= p.out[d];
                     const int64_t k = source_index(p.mode, pos - p.begin[d], p.in[d]);
                     if (k < 0) {
                       inside = false;
                       break;
                     }
                     off += k * xs[d];
                   }
                   const int64_t o = row * ow;
                   if (!inside) {
                     fill(o, ow);
                     continue;
                   }
                   if (c1 > c0) {
                     ops::copy_elements(p.dtype, x.raw(), off + c0 - bw, y.raw(), o + c0, c1 - c0);
                   }
                   if (p.mode == PadMode::kConstant) {
                     fill(o, c0);
                     fill(o + c1, ow - c1);
                     continue;
                   }
                   for (int64_t col = 0; col < ow; ++col) {
                     if (col >= c0 && col < c1) continue;
                     ops::copy_elements(p.dtype, x.raw(), off + source_index(p.mode, col - bw, iw),
                                        y.raw(), o + col, 1);
                   }
                 }
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_pad(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(PadParams p, pad_params(ctx));
  if (ctx.opset < 11) {
    TERN_ASSIGN_OR_RETURN(float v, ctx.attrs().get_float("value", 0.0f));
    if (v != 0.0f && p.mode == PadMode::kConstant) {
      TERN_ASSIGN_OR_RETURN(p.attr_value, Tensor::allocate(p.dtype, {}));
      if (!ops::visit_any_float(p.dtype, [&](auto tag) {
            using T = decltype(tag);
            *p.attr_value.template data<T>() = ops::from_double<T>(v);
          })) {
        return ops::dtype_error(ctx, 0, "float types (a 'value' attribute, opset < 11)");
      }
    }
  }
  return make_kernel("pad_rows", std::move(p), run_pad);
}

// ---- DepthToSpace / SpaceToDepth ----------------------------------------------------------------

struct D2SParams {
  DType dtype;
  bool to_space, crd;
  int64_t b;
  Shape in;
};

Expected<D2SParams> d2s_params(const OpContext& ctx, Shape* out) {
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() != 4) return invalid_model(ctx.where, ": input must be 4-D (NCHW)");
  TERN_ASSIGN_OR_RETURN(int64_t b, ctx.attrs().get_int("blocksize", 0));
  if (b < 1) return invalid_model(ctx.where, ": blocksize must be positive");
  TERN_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "DCR"));
  D2SParams p{ctx.inputs[0].dtype, ctx.node->op_type == "DepthToSpace", mode == "CRD", b, x};
  if (p.to_space) {
    if (x[1] % (b * b)) return invalid_model(ctx.where, ": channels not divisible by blocksize^2");
    *out = {x[0], x[1] / (b * b), x[2] * b, x[3] * b};
  } else {
    if (x[2] % b || x[3] % b) return invalid_model(ctx.where, ": H, W not divisible by blocksize");
    *out = {x[0], x[1] * b * b, x[2] / b, x[3] / b};
  }
  return p;
}

Status infer_d2s(OpContext& ctx) {
  Shape out;
  TERN_RETURN_IF_ERROR(d2s_params(ctx, &out).status());
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

Status run_d2s(const D2SParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  const Shape& ys = y.shape();
  const int64_t b = p.b;
  ops::for_each_index(p.to_space ? ys : p.in, [&](int64_t i, const std::vector<int64_t>& pos) {
    // pos indexes the space-side tensor [n, c, h*b, w*b]; find the depth-side element.
    const int64_t n = pos[0], c = pos[1], h = pos[2], w = pos[3];
    const int64_t bh = h % b, bw = w % b;
    const int64_t C = p.to_space ? ys[1] : p.in[1];
    const int64_t dc = p.crd ? c * b * b + bh * b + bw : (bh * b + bw) * C + c;
    const Shape& ds = p.to_space ? p.in : ys;
    const int64_t doff = ((n * ds[1] + dc) * ds[2] + h / b) * ds[3] + w / b;
    if (p.to_space) {
      ops::copy_elements(p.dtype, x.raw(), doff, y.raw(), i, 1);
    } else {
      ops::copy_elements(p.dtype, x.raw(), i, y.raw(), doff, 1);
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_d2s(const OpContext& ctx) {
  Shape out;
  TERN_ASSIGN_OR_RETURN(D2SParams p, d2s_params(ctx, &out));
  return make_kernel("reference", std::move(p), run_d2s);
}

// ---- ReverseSequence ----------------------------------------------------------------------------

struct RevParams {
  DType dtype;
  int64_t batch_axis, time_axis;
  Shape in;
};

Status infer_same(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_reverse(const RevParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor& lens = *a.inputs[1];
  const Shape xs = ops::contiguous_strides(p.in);
  Status st;
  ops::for_each_index(p.in, [&](int64_t i, const std::vector<int64_t>& pos) {
    const int64_t bi = pos[static_cast<size_t>(p.batch_axis)];
    const int64_t t = pos[static_cast<size_t>(p.time_axis)];
    const int64_t len = std::min<int64_t>(lens.int_at(bi), p.in[static_cast<size_t>(p.time_axis)]);
    int64_t src = i;
    if (t < len) src = i + (len - 1 - 2 * t) * xs[static_cast<size_t>(p.time_axis)];
    ops::copy_elements(p.dtype, x.raw(), src, a.outputs[0]->raw(), i, 1);
  });
  return st;
}

Expected<std::unique_ptr<Kernel>> make_reverse(const OpContext& ctx) {
  RevParams p{ctx.inputs[0].dtype, 1, 0, ctx.inputs[0].shape};
  TERN_ASSIGN_OR_RETURN(p.batch_axis, ctx.attrs().get_int("batch_axis", 1));
  TERN_ASSIGN_OR_RETURN(p.time_axis, ctx.attrs().get_int("time_axis", 0));
  if (p.in.size() < 2 || p.batch_axis == p.time_axis || p.batch_axis < 0 || p.batch_axis > 1 ||
      p.time_axis < 0 || p.time_axis > 1) {
    return invalid_model(ctx.where, ": batch_axis and time_axis must be 0 and 1");
  }
  return make_kernel("reference", std::move(p), run_reverse);
}

// ---- TopK ---------------------------------------------------------------------------------------

struct TopKParams {
  DType dtype;
  int64_t outer, dim, inner, k;
  bool largest, sorted;
};

Expected<TopKParams> topk_params(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  int64_t k = 0;
  if (ctx.opset < 10) {
    TERN_ASSIGN_OR_RETURN(k, ctx.attrs().get_int("k", 0));
  } else {
    TERN_ASSIGN_OR_RETURN(auto kv, ops::input_ints(ctx, 1));
    if (kv.size() != 1) return invalid_model(ctx.where, ": K must hold one value");
    k = kv[0];
  }
  TopKParams p{ctx.inputs[0].dtype, 1, x[static_cast<size_t>(axis)], 1, k, true, true};
  if (k < 0 || k > p.dim)
    return invalid_argument(ctx.where, ": K ", k, " outside [0, ", p.dim, "]");
  TERN_ASSIGN_OR_RETURN(int64_t largest, ctx.attrs().get_int("largest", 1));
  TERN_ASSIGN_OR_RETURN(int64_t sorted, ctx.attrs().get_int("sorted", 1));
  p.largest = largest != 0, p.sorted = sorted != 0;
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  return p;
}

Status infer_topk(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(TopKParams p, topk_params(ctx));
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", -1));
  TERN_ASSIGN_OR_RETURN(
      axis, ops::normalize_axis(axis, static_cast<int64_t>(ctx.inputs[0].shape.size())));
  Shape out = ctx.inputs[0].shape;
  out[static_cast<size_t>(axis)] = p.k;
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  ctx.set_output(1, DType::kInt64, out);
  return Status::ok();
}

// Per slice: (value, index) pairs of the slice's type, the first k put in order by partial_sort
// under a total order (value, ties by the lower index as ONNX requires, NaN above every number),
// so the result is a stable sort's first k at O(n log k). Slices are split among threads.
template <class T>
void topk_slices(const TopKParams& p, const T* x, T* values, int64_t* indices, int threads) {
  auto before = [largest = p.largest](const std::pair<T, int64_t>& l,
                                      const std::pair<T, int64_t>& r) {
    if constexpr (std::is_floating_point_v<T>) {
      const bool ln = std::isnan(l.first), rn = std::isnan(r.first);
      if (ln || rn) return ln != rn ? (largest ? ln : rn) : l.second < r.second;
    }
    if (l.first != r.first) return largest ? l.first > r.first : l.first < r.first;
    return l.second < r.second;
  };
  parallel_for(p.outer * p.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(p.dim, 1)), threads,
               [&](int64_t b, int64_t e) {
                 std::vector<std::pair<T, int64_t>> row(static_cast<size_t>(p.dim));
                 for (int64_t s = b; s < e; ++s) {
                   const int64_t o = s / p.inner, in = s % p.inner;
                   const T* src = x + o * p.dim * p.inner + in;
                   for (int64_t j = 0; j < p.dim; ++j)
                     row[static_cast<size_t>(j)] = {src[j * p.inner], j};
                   std::partial_sort(row.begin(), row.begin() + p.k, row.end(), before);
                   for (int64_t j = 0; j < p.k; ++j) {
                     const int64_t dst = (o * p.k + j) * p.inner + in;
                     values[dst] = row[static_cast<size_t>(j)].first;
                     indices[dst] = row[static_cast<size_t>(j)].second;
                   }
                 }
               });
}

Status run_topk(const TopKParams& p, const KernelArgs& a, const ExecContext& exec) {
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      topk_slices<T>(p, a.inputs[0]->data<T>(), a.outputs[0]->data<T>(),
                     a.outputs[1]->data<int64_t>(), exec.num_threads);
    } else {  // float16 / bfloat16: as float, the bits of the chosen elements copied
      const std::vector<float> x = ops::to_float32(*a.inputs[0]);
      std::vector<float> v(static_cast<size_t>(a.outputs[0]->numel()));
      topk_slices<float>(p, x.data(), v.data(), a.outputs[1]->data<int64_t>(), exec.num_threads);
      const int64_t* idx = a.outputs[1]->data<int64_t>();
      for (int64_t s = 0; s < p.outer * p.k * p.inner; ++s) {
        const int64_t o = s / (p.k * p.inner), in = s % p.inner;
        ops::copy_elements(p.dtype, a.inputs[0]->raw(), (o * p.dim + idx[s]) * p.inner + in,
                           a.outputs[0]->raw(), s, 1);
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_topk(const OpContext& ctx) {
  if (!ops::visit_all_numeric(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "numeric types");
  }
  TERN_ASSIGN_OR_RETURN(TopKParams p, topk_params(ctx));
  return make_kernel("partial_sort", p, run_topk);
}

// ---- Unique: values (sorted or in first-seen order), indices, inverse indices, counts ---------

struct UniqueResult {
  std::vector<int64_t> first;  // slice index of each unique value, in output order
  std::vector<int64_t> inverse, counts;
};

// Slices along `axis` (or elements when flattening) compared as double tuples.
UniqueResult unique_of(const Tensor& x, bool has_axis, int64_t axis, bool sorted) {
  Shape s = x.shape();
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (has_axis) {
    dim = s[static_cast<size_t>(axis)];
    outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  }
  std::vector<std::vector<double>> keys(static_cast<size_t>(dim));
  for (int64_t k = 0; k < dim; ++k) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        keys[static_cast<size_t>(k)].push_back(x.float_at((o * dim + k) * inner + i));
      }
    }
  }
  std::map<std::vector<double>, int64_t> seen;
  UniqueResult r;
  std::vector<int64_t> slot(static_cast<size_t>(dim));
  for (int64_t k = 0; k < dim; ++k) {
    auto [it, fresh] =
        seen.emplace(keys[static_cast<size_t>(k)], static_cast<int64_t>(r.first.size()));
    if (fresh) r.first.push_back(k), r.counts.push_back(0);
    slot[static_cast<size_t>(k)] = it->second;
    ++r.counts[static_cast<size_t>(it->second)];
  }
  if (sorted) {
    std::vector<int64_t> order(r.first.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t l, int64_t rr) {
      return keys[static_cast<size_t>(r.first[static_cast<size_t>(l)])] <
             keys[static_cast<size_t>(r.first[static_cast<size_t>(rr)])];
    });
    std::vector<int64_t> rank(order.size()), first, counts;
    for (size_t i = 0; i < order.size(); ++i) {
      rank[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
      first.push_back(r.first[static_cast<size_t>(order[i])]);
      counts.push_back(r.counts[static_cast<size_t>(order[i])]);
    }
    for (int64_t& sl : slot) sl = rank[static_cast<size_t>(sl)];
    r.first = first, r.counts = counts;
  }
  r.inverse = slot;
  return r;
}

struct UniqueParams {
  bool has_axis, sorted;
  int64_t axis;
};

Expected<UniqueParams> unique_params(const OpContext& ctx) {
  UniqueParams p{false, true, 0};
  TERN_ASSIGN_OR_RETURN(int64_t sorted, ctx.attrs().get_int("sorted", 1));
  p.sorted = sorted != 0;
  if (const Attribute* ax = ctx.attrs().find("axis")) {
    p.has_axis = true;
    TERN_ASSIGN_OR_RETURN(
        p.axis, ops::normalize_axis(ax->i, static_cast<int64_t>(ctx.inputs[0].shape.size())));
  }
  return p;
}

Status infer_unique(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(UniqueParams p, unique_params(ctx));
  const Tensor& x = *ctx.inputs[0].value;
  UniqueResult r = unique_of(x, p.has_axis, p.axis, p.sorted);
  const int64_t u = static_cast<int64_t>(r.first.size());
  Shape ys = p.has_axis ? x.shape() : Shape{u};
  if (p.has_axis) ys[static_cast<size_t>(p.axis)] = u;
  ctx.set_output(0, x.dtype(), ys);
  for (size_t i = 1; i < ctx.outputs.size(); ++i) {
    ctx.set_output(i, DType::kInt64, {i == 2 ? static_cast<int64_t>(r.inverse.size()) : u});
  }
  return Status::ok();
}

Status run_unique(const UniqueParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  UniqueResult r = unique_of(x, p.has_axis, p.axis, p.sorted);
  const Shape& s = x.shape();
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (p.has_axis) {
    dim = s[static_cast<size_t>(p.axis)];
    for (int64_t d = 0; d < p.axis; ++d) outer *= s[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(p.axis) + 1; d < s.size(); ++d) inner *= s[d];
  }
  const int64_t u = static_cast<int64_t>(r.first.size());
  for (int64_t j = 0; j < u; ++j) {
    for (int64_t o = 0; o < outer; ++o) {
      ops::copy_elements(x.dtype(), x.raw(), (o * dim + r.first[static_cast<size_t>(j)]) * inner,
                         a.outputs[0]->raw(), (o * u + j) * inner, inner);
    }
  }
  const std::vector<int64_t>* lists[] = {&r.first, &r.inverse, &r.counts};
  for (size_t i = 1; i < a.outputs.size() && i < 4; ++i) {
    if (a.outputs[i])
      std::copy(lists[i - 1]->begin(), lists[i - 1]->end(), a.outputs[i]->data<int64_t>());
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_unique_kernel(const OpContext& ctx) {
  if (!ops::visit_all_numeric(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "numeric types");
  }
  TERN_ASSIGN_OR_RETURN(UniqueParams p, unique_params(ctx));
  return make_kernel("reference", p, run_unique);
}

}  // namespace

TERN_REGISTRATION void register_op_split(OpRegistry& r) {
  r.add(
      {"Split", 1, 2, 1, 1 << 16, infer_split, make_split, {1}, attrs("axis, num_outputs, split")});
  r.add({"Pad", 1, 4, 1, 1, infer_pad, make_pad, {1, 3}, attrs("mode, pads, value")});
  r.add({"DepthToSpace", 1, 1, 1, 1, infer_d2s, make_d2s, {}, attrs("blocksize, mode")});
  r.add({"SpaceToDepth", 1, 1, 1, 1, infer_d2s, make_d2s, {}, attrs("blocksize")});
  r.add({"ReverseSequence",
         2,
         2,
         1,
         1,
         infer_same,
         make_reverse,
         {},
         attrs("batch_axis, time_axis")});
  r.add({"TopK", 1, 2, 2, 2, infer_topk, make_topk, {1}, attrs("axis, k, largest, sorted")});
  r.add({"Unique", 1, 1, 1, 4, infer_unique, make_unique_kernel, {0}, attrs("axis, sorted")});
}

}  // namespace tern
