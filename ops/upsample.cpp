// Upsample (opset 7-9; deprecated at 10 in favour of Resize, whose kernels this does not share):
// scales from the attribute at opset 7-8, from the second input since 9; every scale >= 1; the
// output dim is floor(in * scale). Coordinates are asymmetric (output index o reads source
// coordinate o / scale): nearest takes its floor, linear interpolates between its floor and the
// next index (the last index repeats at the edge) on every axis whose scale is not 1.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/op_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct UpsampleParams {
  bool linear = false;
  DType dtype = DType::kUndefined;
  Shape in, out;
  std::vector<double> scales;
};

Expected<UpsampleParams> parse_upsample(const OpContext& ctx) {
  if (ctx.opset >= 10) {
    return unsupported("Upsample is deprecated since opset 10 (the model's is ", ctx.opset,
                       "): use Resize");
  }
  UpsampleParams p;
  p.in = ctx.inputs[0].shape;
  p.dtype = ctx.inputs[0].dtype;
  const size_t r = p.in.size();
  TERN_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("mode", "nearest"));
  if (mode == "linear") {
    p.linear = true;
  } else if (mode != "nearest") {
    return invalid_model("mode '", mode, "' is not nearest or linear");
  }
  std::vector<float> scales;
  if (ctx.opset < 9) {
    if (ctx.has_input(1)) return invalid_model("before opset 9, scales is an attribute");
    if (!ctx.attrs().has("scales")) return invalid_model("the 'scales' attribute is required");
    TERN_ASSIGN_OR_RETURN(scales, ctx.attrs().get_floats("scales"));
  } else {
    if (!ctx.has_input(1)) return invalid_model("since opset 9, scales is the second input");
    if (ctx.attrs().has("scales")) {
      return invalid_model("since opset 9, scales is an input, not an attribute");
    }
    const Tensor& t = *ctx.inputs[1].value;
    for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(static_cast<float>(t.float_at(i)));
  }
  if (scales.size() != r) {
    return invalid_model("scales has ", scales.size(), " values for rank ", r);
  }
  p.out.resize(r);
  for (size_t d = 0; d < r; ++d) {
    if (!(scales[d] >= 1.0f) || !std::isfinite(scales[d])) {
      return invalid_model("scale ", scales[d], " of dim ", d, " is not >= 1");
    }
    p.scales.push_back(scales[d]);
    const double n = std::floor(static_cast<double>(p.in[d]) * scales[d]);
    if (n > static_cast<double>(int64_t{1} << 62)) return invalid_model("scales are too large");
    p.out[d] = static_cast<int64_t>(n);
  }
  if (p.linear && !ops::visit_any_float(p.dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types (linear)");
  }
  if (p.dtype == DType::kString) return ops::dtype_error(ctx, 0, "non-string types");
  return p;
}

Status infer_upsample(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(UpsampleParams p, parse_upsample(ctx));
  ctx.set_output(0, p.dtype, p.out);
  return Status::ok();
}

// Source coordinate o / scale of output index o, its floor and the weight of the next index.
struct Tap {
  int64_t i0, i1;
  double w1;
};

std::vector<Tap> taps(const UpsampleParams& p, size_t d) {
  std::vector<Tap> t;
  for (int64_t o = 0; o < p.out[d]; ++o) {
    const double c = static_cast<double>(o) / p.scales[d];
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(c)), p.in[d] - 1);
    const int64_t i1 = std::min(i0 + 1, p.in[d] - 1);
    t.push_back({i0, i1, i1 == i0 ? 0.0 : c - static_cast<double>(i0)});
  }
  return t;
}

// Nearest: each output element copies the element at its per-dim floor indices (bytes of the
// element size, so any dtype), rows split among threads.
void run_nearest(const UpsampleParams& p, const Tensor& x, Tensor& y, int threads) {
  const size_t r = p.in.size(), es = dtype_size(p.dtype);
  if (r == 0) {
    std::memcpy(y.raw(), x.raw(), es);
    return;
  }
  std::vector<std::vector<Tap>> t(r);
  for (size_t d = 0; d < r; ++d) t[d] = taps(p, d);
  const Shape xs = ops::contiguous_strides(p.in);
  const int64_t inner = p.out[r - 1], rows = numel(p.out) / inner;
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  parallel_for(rows, std::max<int64_t>(1, 4096 / inner), threads, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t off = 0, rem = row;
      for (size_t d = r - 1; d-- > 0;) {
        off += t[d][static_cast<size_t>(rem % p.out[d])].i0 * xs[d];
        rem /= p.out[d];
      }
      uint8_t* out = dst + static_cast<size_t>(row * inner) * es;
      for (int64_t o = 0; o < inner; ++o) {
        std::memcpy(out + static_cast<size_t>(o) * es,
                    src + static_cast<size_t>(off + t[r - 1][static_cast<size_t>(o)].i0) * es, es);
      }
    }
  });
}

// Linear: separable, one axis at a time in double (axes of scale 1 are skipped).
void run_linear(const UpsampleParams& p, const Tensor& x, Tensor& y) {
  std::vector<double> cur(static_cast<size_t>(numel(p.in)));
  ops::visit_any_float(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < cur.size(); ++i) cur[i] = ops::as_double(x.data<T>()[i]);
  });
  Shape shape = p.in;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (p.out[d] == shape[d]) continue;
    const std::vector<Tap> t = taps(p, d);
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < d; ++k) outer *= shape[k];
    for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
    std::vector<double> next(static_cast<size_t>(outer * p.out[d] * inner));
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t o = 0; o < p.out[d]; ++o) {
        const Tap& tp = t[static_cast<size_t>(o)];
        const double* r0 = cur.data() + (a * shape[d] + tp.i0) * inner;
        const double* r1 = cur.data() + (a * shape[d] + tp.i1) * inner;
        double* out = next.data() + (a * p.out[d] + o) * inner;
        for (int64_t i = 0; i < inner; ++i) out[i] = r0[i] + (r1[i] - r0[i]) * tp.w1;
      }
    }
    cur.swap(next);
    shape[d] = p.out[d];
  }
  ops::visit_any_float(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < cur.size(); ++i) y.data<T>()[i] = ops::from_double<T>(cur[i]);
  });
}

Status run_upsample(const UpsampleParams& p, const KernelArgs& a, const ExecContext& exec) {
  if (numel(p.out) == 0) return Status::ok();
  if (p.linear) {
    run_linear(p, *a.inputs[0], *a.outputs[0]);
  } else {
    run_nearest(p, *a.inputs[0], *a.outputs[0], exec.num_threads);
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_upsample(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(UpsampleParams p, parse_upsample(ctx));
  return make_kernel("upsample", std::move(p), run_upsample);
}

}  // namespace

TERN_REGISTRATION void register_op_upsample(OpRegistry& r) {
  r.add({"Upsample", 1, 2, 1, 1, infer_upsample, make_upsample, {1}, attrs("mode, scales")});
}

}  // namespace tern
