// DFT (forward / inverse, onesided real FFT and its inverse, dft_length, axis as attribute
// before opset 20 and input since) and STFT (frame_step, window, frame_length, onesided).
// Direct O(n * n_out) transforms in double per signal: the reference, not a fast FFT.
#include <cmath>
#include <complex>
#include <numbers>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

using cd = std::complex<double>;

struct DftParams {
  bool inverse, onesided;
  int64_t outer, n_in, inner, c_in;  // input viewed as [outer, n_in, inner, c_in]
  int64_t n, n_out, c_out;           // transform length, output length along axis, complex
};

Expected<DftParams> dft_params(const OpContext& ctx, Shape* out) {
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() < 2 || (x.back() != 1 && x.back() != 2)) {
    return invalid_model(ctx.where, ": input must end in a dim of 1 (real) or 2 (complex)");
  }
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = 1;
  if (ctx.opset >= 20) {
    axis = -2;
    if (ctx.has_input(2)) {
      TERN_ASSIGN_OR_RETURN(auto a, ops::input_ints(ctx, 2));
      if (a.size() != 1) return invalid_model(ctx.where, ": axis must be a scalar");
      axis = a[0];
    }
  } else {
    TERN_ASSIGN_OR_RETURN(axis, ctx.attrs().get_int("axis", 1));
  }
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, r));
  if (axis == r - 1) return invalid_model(ctx.where, ": axis cannot be the complex dim");
  DftParams p{};
  TERN_ASSIGN_OR_RETURN(int64_t inv, ctx.attrs().get_int("inverse", 0));
  TERN_ASSIGN_OR_RETURN(int64_t one, ctx.attrs().get_int("onesided", 0));
  p.inverse = inv != 0, p.onesided = one != 0;
  p.outer = 1, p.inner = 1, p.c_in = x.back();
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r - 1; ++d) p.inner *= x[static_cast<size_t>(d)];
  p.n_in = x[static_cast<size_t>(axis)];
  if (p.inverse && p.onesided) {
    p.n = 2 * (p.n_in - 1);  // Hermitian half spectrum in, real signal out
  } else {
    p.n = p.n_in;
  }
  if (ctx.has_input(1)) {
    TERN_ASSIGN_OR_RETURN(auto len, ops::input_ints(ctx, 1));
    if (len.size() != 1 || len[0] < 1) return invalid_model(ctx.where, ": bad dft_length");
    p.n = len[0];
  }
  p.n_out = p.onesided && !p.inverse ? p.n / 2 + 1 : p.n;
  p.c_out = p.inverse && p.onesided ? 1 : 2;
  *out = x;
  (*out)[static_cast<size_t>(axis)] = p.n_out;
  out->back() = p.c_out;
  return p;
}

Status infer_dft(OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  Shape out;
  TERN_RETURN_IF_ERROR(dft_params(ctx, &out).status());
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

// One transform of `sig` (length n after zero padding / truncation) into n_out bins.
void transform(const std::vector<cd>& sig, int64_t n, int64_t n_out, bool inverse,
               std::vector<cd>* out) {
  out->assign(static_cast<size_t>(n_out), cd(0, 0));
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < n_out; ++k) {
    cd acc(0, 0);
    for (int64_t j = 0; j < n && j < static_cast<int64_t>(sig.size()); ++j) {
      const double ang = sign * 2 * std::numbers::pi * static_cast<double>((j * k) % n) /
                         static_cast<double>(n);
      acc += sig[static_cast<size_t>(j)] * cd(std::cos(ang), std::sin(ang));
    }
    (*out)[static_cast<size_t>(k)] = inverse ? acc / static_cast<double>(n) : acc;
  }
}

Status run_dft(const DftParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  std::vector<cd> sig, res;
  std::vector<double> out(static_cast<size_t>(y.numel()));
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      sig.assign(static_cast<size_t>(p.n), cd(0, 0));
      auto at = [&](int64_t k) -> cd {
        const int64_t base = ((o * p.n_in + k) * p.inner + i) * p.c_in;
        return {x.float_at(base), p.c_in == 2 ? x.float_at(base + 1) : 0.0};
      };
      if (p.inverse && p.onesided) {  // rebuild the full spectrum from its Hermitian half
        for (int64_t k = 0; k < p.n; ++k) {
          const int64_t src = k < p.n_in ? k : p.n - k;
          if (src >= p.n_in || src < 0) continue;
          sig[static_cast<size_t>(k)] = k < p.n_in ? at(src) : std::conj(at(src));
        }
      } else {
        for (int64_t k = 0; k < std::min(p.n, p.n_in); ++k) sig[static_cast<size_t>(k)] = at(k);
      }
      transform(sig, p.n, p.n_out, p.inverse, &res);
      for (int64_t k = 0; k < p.n_out; ++k) {
        const int64_t base = ((o * p.n_out + k) * p.inner + i) * p.c_out;
        out[static_cast<size_t>(base)] = res[static_cast<size_t>(k)].real();
        if (p.c_out == 2) out[static_cast<size_t>(base + 1)] = res[static_cast<size_t>(k)].imag();
      }
    }
  }
  ops::visit_any_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < out.size(); ++k) y.data<T>()[k] = ops::from_double<T>(out[k]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_dft(const OpContext& ctx) {
  Shape out;
  TERN_ASSIGN_OR_RETURN(DftParams p, dft_params(ctx, &out));
  return make_kernel("reference", p, run_dft);
}

// ---- STFT(signal [batch, length, 1|2], frame_step, window?, frame_length?) ----------------------

struct StftParams {
  bool onesided;
  int64_t batch, length, c_in, step, frame, frames, bins;
};

Expected<StftParams> stft_params(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() != 3 || (x[2] != 1 && x[2] != 2)) {
    return invalid_model(ctx.where, ": signal must be [batch, length, 1 or 2]");
  }
  TERN_ASSIGN_OR_RETURN(auto step, ops::input_ints(ctx, 1));
  StftParams p{true, x[0], x[1], x[2], step.empty() ? 0 : step[0], 0, 0, 0};
  TERN_ASSIGN_OR_RETURN(int64_t one, ctx.attrs().get_int("onesided", 1));
  p.onesided = one != 0 && x[2] == 1;
  if (ctx.has_input(3)) {
    TERN_ASSIGN_OR_RETURN(auto fl, ops::input_ints(ctx, 3));
    p.frame = fl.empty() ? 0 : fl[0];
  } else if (ctx.has_input(2)) {
    p.frame = ctx.inputs[2].shape.empty() ? 0 : ctx.inputs[2].shape[0];
  }
  if (p.step < 1 || p.frame < 1 || p.frame > p.length) {
    return invalid_model(ctx.where, ": bad frame_step / frame_length");
  }
  p.frames = (p.length - p.frame) / p.step + 1;
  p.bins = p.onesided ? p.frame / 2 + 1 : p.frame;
  return p;
}

Status infer_stft(OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  TERN_ASSIGN_OR_RETURN(StftParams p, stft_params(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, {p.batch, p.frames, p.bins, 2});
  return Status::ok();
}

Status run_stft(const StftParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor* win = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  Tensor& y = *a.outputs[0];
  std::vector<cd> sig(static_cast<size_t>(p.frame)), res;
  std::vector<double> out(static_cast<size_t>(y.numel()));
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t f = 0; f < p.frames; ++f) {
      for (int64_t j = 0; j < p.frame; ++j) {
        const int64_t at = ((b * p.length) + f * p.step + j) * p.c_in;
        const double w = win ? win->float_at(j) : 1.0;
        sig[static_cast<size_t>(j)] = cd(x.float_at(at) * w, p.c_in == 2 ? x.float_at(at + 1) * w : 0.0);
      }
      transform(sig, p.frame, p.bins, false, &res);
      for (int64_t k = 0; k < p.bins; ++k) {
        const size_t o = static_cast<size_t>(((b * p.frames + f) * p.bins + k) * 2);
        out[o] = res[static_cast<size_t>(k)].real();
        out[o + 1] = res[static_cast<size_t>(k)].imag();
      }
    }
  }
  ops::visit_any_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < out.size(); ++k) y.data<T>()[k] = ops::from_double<T>(out[k]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_stft(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(StftParams p, stft_params(ctx));
  return make_kernel("reference", p, run_stft);
}

}  // namespace

TERN_REGISTRATION void register_op_dft(OpRegistry& r) {
  r.add({"DFT", 1, 3, 1, 1, infer_dft, make_dft, {1, 2}, attrs("axis, inverse, onesided")});
  r.add({"STFT", 2, 4, 1, 1, infer_stft, make_stft, {1, 3}, attrs("onesided")});
}

}  // namespace tern
