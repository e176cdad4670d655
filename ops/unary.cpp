// Elementwise unary math: trigonometric and hyperbolic functions, exp/log/sqrt, rounding, sign,
// the parametric activations (Elu, Celu, Selu, LeakyRelu, ThresholdedRelu, Softplus, Softsign,
// Mish, Gelu, Swish, Shrink), IsNaN/IsInf, Not and BitwiseNot.
// Float types compute in double and round once; Abs, Neg, Sign and Shrink also take integers.
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class U {
  kAbs, kNeg, kSqrt, kExp, kLog, kReciprocal, kTanh, kCeil, kFloor, kRound, kSign, kSin, kCos,
  kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kErf, kElu, kCelu, kSelu,
  kLeakyRelu, kThresholdedRelu, kSoftplus, kSoftsign, kMish, kGelu, kSwish, kShrink
};

struct UnaryParams {
  U op;
  DType dtype;
  double alpha = 0, beta = 0;  // op parameters (see make_unary)
  bool tanh_approx = false;    // Gelu approximate="tanh"
};

double apply(const UnaryParams& p, double x) {
  switch (p.op) {
    case U::kAbs:
      return std::fabs(x);
    case U::kNeg:
      return -x;
    case U::kSqrt:
      return std::sqrt(x);
    case U::kExp:
      return std::exp(x);
    case U::kLog:
      return std::log(x);
    case U::kReciprocal:
      return 1.0 / x;
    case U::kTanh:
      return std::tanh(x);
    case U::kCeil:
      return std::ceil(x);
    case U::kFloor:
      return std::floor(x);
    case U::kRound:
      return std::nearbyint(x);  // halves to even
    case U::kSign:
      return std::isnan(x) ? x : (x > 0) - (x < 0);
    case U::kSin:
      return std::sin(x);
    case U::kCos:
      return std::cos(x);
    case U::kTan:
      return std::tan(x);
    case U::kAsin:
      return std::asin(x);
    case U::kAcos:
      return std::acos(x);
    case U::kAtan:
      return std::atan(x);
    case U::kSinh:
      return std::sinh(x);
    case U::kCosh:
      return std::cosh(x);
    case U::kAsinh:
      return std::asinh(x);
    case U::kAcosh:
      return std::acosh(x);
    case U::kAtanh:
      return std::atanh(x);
    case U::kErf:
      return std::erf(x);
    case U::kElu:
      return x >= 0 ? x : p.alpha * (std::exp(x) - 1);
    case U::kCelu:
      return std::max(0.0, x) + std::min(0.0, p.alpha * (std::exp(x / p.alpha) - 1));
    case U::kSelu:
      return x > 0 ? p.beta * x : p.beta * p.alpha * (std::exp(x) - 1);
    case U::kLeakyRelu:
      return x >= 0 ? x : p.alpha * x;
    case U::kThresholdedRelu:
      return x > p.alpha ? x : 0;
    case U::kSoftplus:
      return x > 30 ? x : std::log1p(std::exp(x));
    case U::kSoftsign:
      return x / (1 + std::fabs(x));
    case U::kMish:
      return x * std::tanh(x > 30 ? x : std::log1p(std::exp(x)));
    case U::kGelu:
      if (p.tanh_approx) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case U::kSwish:
      return x / (1 + std::exp(-p.alpha * x));
    case U::kShrink:
      return x < -p.alpha ? x + p.beta : x > p.alpha ? x - p.beta : 0;
  }
  return x;
}

Status infer_same(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

template <class T>
T to_int_saturated(double v) {
  if (std::isnan(v)) return T{0};
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
    return std::numeric_limits<T>::lowest();
  }
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// float32 loops for the unary ops transformer and CNN graphs run most, in single precision (the
// C library's float functions are within an ulp or two; rtol 1e-3 is what models are held to).
template <class F>
void map_f32(const Tensor& x, Tensor& y, int threads, F f) {
  const float* px = x.data<float>();
  float* py = y.data<float>();
  parallel_for(x.numel(), 16384, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) py[i] = f(px[i]);
  });
}

bool run_unary_f32(const UnaryParams& p, const KernelArgs& a, const ExecContext& exec) {
  if (p.dtype != DType::kFloat32) return false;
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  switch (p.op) {
    case U::kErf:
      map_f32(x, y, exec.num_threads, [](float v) { return std::erf(v); });
      return true;
    case U::kTanh:
      map_f32(x, y, exec.num_threads, [](float v) { return std::tanh(v); });
      return true;
    case U::kExp:
      map_f32(x, y, exec.num_threads, [](float v) { return std::exp(v); });
      return true;
    case U::kSqrt:
      map_f32(x, y, exec.num_threads, [](float v) { return std::sqrt(v); });
      return true;
    case U::kNeg:
      map_f32(x, y, exec.num_threads, [](float v) { return -v; });
      return true;
    default:
      return false;
  }
}

Status run_unary(const UnaryParams& p, const KernelArgs& a, const ExecContext& exec) {
  if (run_unary_f32(p, a, exec)) return Status::ok();
  const Tensor& x = *a.inputs[0];
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = a.outputs[0]->data<T>();
    parallel_for(x.numel(), 8192, exec.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if constexpr (ops::is_float_like_v<T>) {
          py[i] = ops::from_double<T>(apply(p, ops::as_double(px[i])));
        } else if constexpr (std::is_signed_v<T>) {
          if (p.op == U::kAbs) {
            py[i] = px[i] < 0 ? static_cast<T>(-px[i]) : px[i];  // wraps like numpy at the minimum
          } else if (p.op == U::kNeg) {
            py[i] = static_cast<T>(-px[i]);
          } else {
            py[i] = to_int_saturated<T>(apply(p, static_cast<double>(px[i])));
          }
        } else {
          if (p.op == U::kNeg) {
            py[i] = static_cast<T>(-px[i]);
          } else {
            py[i] = to_int_saturated<T>(apply(p, static_cast<double>(px[i])));
          }
        }
      }
    });
  });
  return Status::ok();
}

bool takes_integers(U op) {
  return op == U::kAbs || op == U::kNeg || op == U::kSign || op == U::kShrink;
}

Expected<std::unique_ptr<Kernel>> make_unary(const OpContext& ctx, U op) {
  UnaryParams p{op, ctx.inputs[0].dtype};
  const bool ok = takes_integers(op) ? ops::visit_all_numeric(p.dtype, [](auto) {})
                                     : ops::visit_any_float(p.dtype, [](auto) {});
  if (!ok) {
    return ops::dtype_error(
        ctx, 0, takes_integers(op) ? "numeric types" : "float, double, float16, bfloat16");
  }
  const Attributes& at = ctx.attrs();
  switch (op) {
    case U::kElu:
    case U::kCelu: {
      TERN_ASSIGN_OR_RETURN(float alpha, at.get_float("alpha", 1.0f));
      p.alpha = alpha;
      break;
    }
    case U::kSelu: {
      TERN_ASSIGN_OR_RETURN(float alpha, at.get_float("alpha", 1.67326319217681884765625f));
      TERN_ASSIGN_OR_RETURN(float gamma, at.get_float("gamma", 1.05070102214813232421875f));
      p.alpha = alpha, p.beta = gamma;
      break;
    }
    case U::kLeakyRelu: {
      TERN_ASSIGN_OR_RETURN(float alpha, at.get_float("alpha", 0.01f));
      p.alpha = alpha;
      break;
    }
    case U::kThresholdedRelu:
    case U::kSwish: {
      TERN_ASSIGN_OR_RETURN(float alpha, at.get_float("alpha", 1.0f));
      p.alpha = alpha;
      break;
    }
    case U::kShrink: {
      TERN_ASSIGN_OR_RETURN(float lambd, at.get_float("lambd", 0.5f));
      TERN_ASSIGN_OR_RETURN(float bias, at.get_float("bias", 0.0f));
      p.alpha = lambd, p.beta = bias;
      break;
    }
    case U::kGelu: {
      Expected<std::string> approx = at.get_string("approximate", "none");
      if (!approx) return approx.status();
      if (*approx != "none" && *approx != "tanh") {
        return invalid_model(ctx.where, ": approximate must be 'none' or 'tanh', got '", *approx,
                             "'");
      }
      p.tanh_approx = *approx == "tanh";
      break;
    }
    default:
      break;
  }
  return make_elementwise_kernel("reference", p, run_unary);
}

template <U Op>
Expected<std::unique_ptr<Kernel>> make_unary(const OpContext& ctx) {
  return make_unary(ctx, Op);
}

// IsNaN, IsInf (detect_negative / detect_positive): float in, bool out.
struct IsParams {
  DType dtype;
  bool nan, neg, pos;
};

Status infer_is(OpContext& ctx) {
  ctx.set_output(0, DType::kBool, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_is(const IsParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  uint8_t* y = a.outputs[0]->data<uint8_t>();
  ops::visit_any_float(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double w = ops::as_double(px[i]);
      y[i] = p.nan ? std::isnan(w) : (std::isinf(w) && ((w > 0 && p.pos) || (w < 0 && p.neg)));
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_is(const OpContext& ctx, bool nan) {
  IsParams p{ctx.inputs[0].dtype, nan, true, true};
  if (!ops::visit_any_float(p.dtype, [](auto) {})) return ops::dtype_error(ctx, 0, "float types");
  TERN_ASSIGN_OR_RETURN(int64_t neg, ctx.attrs().get_int("detect_negative", 1));
  TERN_ASSIGN_OR_RETURN(int64_t pos, ctx.attrs().get_int("detect_positive", 1));
  p.neg = neg != 0, p.pos = pos != 0;
  return make_kernel("reference", p, run_is);
}

template <bool kNaN>
Expected<std::unique_ptr<Kernel>> make_is(const OpContext& ctx) {
  return make_is(ctx, kNaN);
}

// Not (bool) and BitwiseNot (integers).
struct NotParams {
  DType dtype;
};

Status run_not(const NotParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  if (p.dtype == DType::kBool) {
    for (int64_t i = 0; i < x.numel(); ++i) {
      a.outputs[0]->data<uint8_t>()[i] = !x.data<uint8_t>()[i];
    }
    return Status::ok();
  }
  ops::visit_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < x.numel(); ++i) {
        a.outputs[0]->data<T>()[i] = static_cast<T>(~x.data<T>()[i]);
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_not(const OpContext& ctx, bool bitwise) {
  const DType dt = ctx.inputs[0].dtype;
  const bool ok =
      bitwise ? (dtype_is_signed_int(dt) || dtype_is_unsigned_int(dt)) : dt == DType::kBool;
  if (!ok) return ops::dtype_error(ctx, 0, bitwise ? "integer types" : "bool");
  return make_kernel("reference", NotParams{dt}, run_not);
}

template <bool kBitwise>
Expected<std::unique_ptr<Kernel>> make_not(const OpContext& ctx) {
  return make_not(ctx, kBitwise);
}

}  // namespace

TERN_REGISTRATION void register_op_unary(OpRegistry& r) {
  auto add = [&](const char* name, KernelFactory f, OpAttributeNames a) {
    r.add({name, 1, 1, 1, 1, infer_same, f, {}, a});
  };
  add("Abs", make_unary<U::kAbs>, attrs({}));
  add("Neg", make_unary<U::kNeg>, attrs({}));
  add("Sqrt", make_unary<U::kSqrt>, attrs({}));
  add("Exp", make_unary<U::kExp>, attrs({}));
  add("Log", make_unary<U::kLog>, attrs({}));
  add("Reciprocal", make_unary<U::kReciprocal>, attrs({}));
  add("Tanh", make_unary<U::kTanh>, attrs({}));
  add("Ceil", make_unary<U::kCeil>, attrs({}));
  add("Floor", make_unary<U::kFloor>, attrs({}));
  add("Round", make_unary<U::kRound>, attrs({}));
  add("Sign", make_unary<U::kSign>, attrs({}));
  add("Sin", make_unary<U::kSin>, attrs({}));
  add("Cos", make_unary<U::kCos>, attrs({}));
  add("Tan", make_unary<U::kTan>, attrs({}));
  add("Asin", make_unary<U::kAsin>, attrs({}));
  add("Acos", make_unary<U::kAcos>, attrs({}));
  add("Atan", make_unary<U::kAtan>, attrs({}));
  add("Sinh", make_unary<U::kSinh>, attrs({}));
  add("Cosh", make_unary<U::kCosh>, attrs({}));
  add("Asinh", make_unary<U::kAsinh>, attrs({}));
  add("Acosh", make_unary<U::kAcosh>, attrs({}));
  add("Atanh", make_unary<U::kAtanh>, attrs({}));
  add("Erf", make_unary<U::kErf>, attrs({}));
  add("Elu", make_unary<U::kElu>, attrs("alpha"));
  add("Celu", make_unary<U::kCelu>, attrs("alpha"));
  add("Selu", make_unary<U::kSelu>, attrs("alpha, gamma"));
  add("LeakyRelu", make_unary<U::kLeakyRelu>, attrs("alpha"));
  add("ThresholdedRelu", make_unary<U::kThresholdedRelu>, attrs("alpha"));
  add("Softplus", make_unary<U::kSoftplus>, attrs({}));
  add("Softsign", make_unary<U::kSoftsign>, attrs({}));
  add("Mish", make_unary<U::kMish>, attrs({}));
  add("Gelu", make_unary<U::kGelu>, attrs("approximate"));
  add("Swish", make_unary<U::kSwish>, attrs("alpha"));
  add("Shrink", make_unary<U::kShrink>, attrs("bias, lambd"));
  r.add({"IsNaN", 1, 1, 1, 1, infer_is, make_is<true>, {}, attrs({})});
  r.add({"IsInf",
         1,
         1,
         1,
         1,
         infer_is,
         make_is<false>,
         {},
         attrs("detect_negative, detect_positive")});
  r.add({"Not", 1, 1, 1, 1, infer_same, make_not<false>, {}, attrs({})});
  r.add({"BitwiseNot", 1, 1, 1, 1, infer_same, make_not<true>, {}, attrs({})});
}

}  // namespace tern
