// Broadcasting elementwise ops beyond the four arithmetic ones: comparisons (bool out), logical
// And/Or/Xor, bitwise ops and BitShift, Pow (mixed base/exponent types), Mod (fmod or Python's
// sign-of-divisor remainder), PRelu, Where, and the variadic Max/Min/Sum/Mean.
#include <cmath>
#include <string>

#include "ops/common/elementwise.h"

namespace tern {
namespace {

// ---- helpers ------------------------------------------------------------------------------------

Expected<Shape> broadcast_all(const OpContext& ctx) {
  Shape out;
  bool first = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (first) {
      out = ctx.inputs[i].shape;
      first = false;
      continue;
    }
    auto s = ops::broadcast_shapes(out, ctx.inputs[i].shape);
    if (!s) return s.status().with_prefix(ctx.where);
    out = *s;
  }
  return out;
}

Status require_all_same_dtype(const OpContext& ctx, size_t from = 0) {
  for (size_t i = from + 1; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, from, i));
  }
  return Status::ok();
}

// ---- comparisons and logical ops ---------------------------------------------------------------

enum class Cmp { kEq, kLt, kGt, kLe, kGe, kAnd, kOr, kXor };

struct CmpParams {
  Cmp op;
  DType dtype;
  ops::BroadcastRows rows;
};

Status infer_cmp(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, 1));
  TERN_ASSIGN_OR_RETURN(Shape out, broadcast_all(ctx));
  ctx.set_output(0, DType::kBool, out);
  return Status::ok();
}

template <class T>
bool compare(Cmp op, const T& a, const T& b) {
  switch (op) {
    case Cmp::kEq:
      return a == b;
    case Cmp::kLt:
      return a < b;
    case Cmp::kGt:
      return a > b;
    case Cmp::kLe:
      return a <= b;
    case Cmp::kGe:
      return a >= b;
    default:
      break;
  }
  if constexpr (std::is_arithmetic_v<T>) {
    if (op == Cmp::kAnd) return a && b;
    if (op == Cmp::kOr) return a || b;
    if (op == Cmp::kXor) return static_cast<bool>(a) != static_cast<bool>(b);
  }
  return false;
}

Status run_cmp(const CmpParams& p, const KernelArgs& a, const ExecContext& exec) {
  uint8_t* y = a.outputs[0]->data<uint8_t>();
  auto go = [&](auto tag) {
    using T = decltype(tag);
    const T* x0 = a.inputs[0]->data<T>();
    const T* x1 = a.inputs[1]->data<T>();
    ops::broadcast_for_each<2>(p.rows, exec.num_threads, [&](int64_t o, const int64_t* off) {
      if constexpr (std::is_same_v<T, ops::Float16> || std::is_same_v<T, ops::BFloat16>) {
        y[o] = compare(p.op, static_cast<float>(x0[off[0]]), static_cast<float>(x1[off[1]]));
      } else {
        y[o] = compare(p.op, x0[off[0]], x1[off[1]]);
      }
    });
  };
  if (p.dtype == DType::kBool) {
    go(uint8_t{});
  } else if (p.dtype == DType::kString) {
    go(std::string{});
  } else {
    ops::visit_all_numeric(p.dtype, go);
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_cmp(const OpContext& ctx, Cmp op) {
  const DType dt = ctx.inputs[0].dtype;
  const bool logical = op == Cmp::kAnd || op == Cmp::kOr || op == Cmp::kXor;
  bool ok = logical ? dt == DType::kBool
                    : ops::visit_all_numeric(dt, [](auto) {}) || dt == DType::kBool ||
                          (op == Cmp::kEq && dt == DType::kString);
  if (!ok) return ops::dtype_error(ctx, 0, logical ? "bool" : "numeric types, bool");
  CmpParams p{
      op, dt,
      ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape})};
  return make_kernel("reference", std::move(p), run_cmp);
}

template <Cmp Op>
Expected<std::unique_ptr<Kernel>> make_cmp(const OpContext& ctx) {
  return make_cmp(ctx, Op);
}

// ---- same-type binary ops: bitwise, BitShift, Mod, PRelu ----------------------------------------

enum class Bin { kBitAnd, kBitOr, kBitXor, kShift, kMod, kPRelu };

struct BinParams {
  Bin op;
  DType dtype;
  ops::BroadcastRows rows;
  bool left = true;   // BitShift direction
  bool fmod = false;  // Mod
};

Status infer_same_type(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_all_same_dtype(ctx));
  TERN_ASSIGN_OR_RETURN(Shape out, broadcast_all(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

template <class T>
T mod_python(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    T r = static_cast<T>(a % b);
    if constexpr (std::is_signed_v<T>) {
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    }
    return r;
  } else {
    double x = ops::as_double(a), y = ops::as_double(b);
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return ops::from_double<T>(r);
  }
}

Status run_bin(const BinParams& p, const KernelArgs& a, const ExecContext& exec) {
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x0 = a.inputs[0]->data<T>();
    const T* x1 = a.inputs[1]->data<T>();
    T* y = a.outputs[0]->data<T>();
    ops::broadcast_for_each<2>(p.rows, exec.num_threads, [&](int64_t o, const int64_t* off) {
      const T u = x0[off[0]], v = x1[off[1]];
      if constexpr (std::is_integral_v<T>) {
        switch (p.op) {
          case Bin::kBitAnd:
            y[o] = static_cast<T>(u & v);
            return;
          case Bin::kBitOr:
            y[o] = static_cast<T>(u | v);
            return;
          case Bin::kBitXor:
            y[o] = static_cast<T>(u ^ v);
            return;
          case Bin::kShift: {
            const auto n = static_cast<uint64_t>(v);
            if (n >= sizeof(T) * 8) {
              y[o] = 0;
            } else {
              y[o] = p.left ? static_cast<T>(u << n) : static_cast<T>(u >> n);
            }
            return;
          }
          default:
            break;
        }
      }
      if (p.op == Bin::kMod) {
        if constexpr (std::is_integral_v<T>) {
          y[o] = p.fmod ? (v == 0 ? T(0) : static_cast<T>(u % v)) : mod_python(u, v);
        } else {
          y[o] = p.fmod ? ops::from_double<T>(std::fmod(ops::as_double(u), ops::as_double(v)))
                        : mod_python(u, v);
        }
      } else if (p.op == Bin::kPRelu) {
        y[o] = ops::as_double(u) < 0 ? ops::from_double<T>(ops::as_double(u) * ops::as_double(v))
                                     : u;
      }
    });
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_bin(const OpContext& ctx, Bin op) {
  const DType dt = ctx.inputs[0].dtype;
  const bool ints = dtype_is_signed_int(dt) || dtype_is_unsigned_int(dt);
  if (op == Bin::kShift && !dtype_is_unsigned_int(dt))
    return ops::dtype_error(ctx, 0, "unsigned integers");
  if ((op == Bin::kBitAnd || op == Bin::kBitOr || op == Bin::kBitXor) && !ints) {
    return ops::dtype_error(ctx, 0, "integer types");
  }
  if (!ops::visit_all_numeric(dt, [](auto) {})) return ops::dtype_error(ctx, 0, "numeric types");
  BinParams p{
      op, dt,
      ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape})};
  if (op == Bin::kShift) {
    TERN_ASSIGN_OR_RETURN(std::string dir, ctx.attrs().get_string("direction", ""));
    if (dir != "LEFT" && dir != "RIGHT") {
      return invalid_model(ctx.where, ": direction must be LEFT or RIGHT, got '", dir, "'");
    }
    p.left = dir == "LEFT";
  }
  if (op == Bin::kMod) {
    TERN_ASSIGN_OR_RETURN(int64_t fm, ctx.attrs().get_int("fmod", 0));
    p.fmod = fm != 0;
  }
  return make_kernel("reference", std::move(p), run_bin);
}

template <Bin Op>
Expected<std::unique_ptr<Kernel>> make_bin(const OpContext& ctx) {
  return make_bin(ctx, Op);
}

// ---- Pow: base and exponent may differ in type; the output has the base's type ----------------

struct PowParams {
  DType base, exp;
  ops::BroadcastRows rows;
};

Status infer_pow(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(Shape out, broadcast_all(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

// The exponent element i as a double, for each exponent type: the kernel is instantiated per
// base type only (base x exponent types was 144 copies, ~90 kB of a size-built library).
template <class E>
double exponent_at(const void* e, int64_t i) {
  return ops::as_double(static_cast<const E*>(e)[i]);
}

Status run_pow(const PowParams& p, const KernelArgs& a, const ExecContext& exec) {
  double (*exp_at)(const void*, int64_t) = nullptr;
  bool int_exp = false;
  ops::visit_all_numeric(p.exp, [&](auto etag) {
    using E = decltype(etag);
    exp_at = exponent_at<E>;
    int_exp = std::is_integral_v<E>;
  });
  const void* e = a.inputs[1]->raw();
  ops::visit_all_numeric(p.base, [&](auto btag) {
    using B = decltype(btag);
    const B* x = a.inputs[0]->data<B>();
    B* y = a.outputs[0]->data<B>();
    ops::broadcast_for_each<2>(p.rows, exec.num_threads, [&](int64_t o, const int64_t* off) {
      const double k = exp_at(e, off[1]);
      if constexpr (std::is_integral_v<B>) {
        if (int_exp) {
          // Repeated products in B (wrapping as B does); a negative exponent gives 1.
          B r = 1;
          const B b = x[off[0]];
          for (int64_t n = static_cast<int64_t>(k); n > 0; --n) r = static_cast<B>(r * b);
          y[o] = r;
          return;
        }
      }
      y[o] = ops::from_double<B>(std::pow(ops::as_double(x[off[0]]), k));
    });
  });
  return Status::ok();
}

// float32 to a constant power of 2, 3, 1 or 0.5 (LayerNorm's variance, BERT-style models): plain
// products and sqrt, which round exactly as pow does for these exponents.
struct PowConstParams {
  float exponent;
};

Status run_pow_const(const PowConstParams& p, const KernelArgs& a, const ExecContext& exec) {
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const float k = p.exponent;
  parallel_for(a.inputs[0]->numel(), 32768, exec.num_threads, [&](int64_t b, int64_t e) {
    if (k == 2.0f) {
      for (int64_t i = b; i < e; ++i) y[i] = x[i] * x[i];
    } else if (k == 3.0f) {
      for (int64_t i = b; i < e; ++i) y[i] = static_cast<float>(static_cast<double>(x[i]) * x[i] * x[i]);
    } else if (k == 1.0f) {
      for (int64_t i = b; i < e; ++i) y[i] = x[i];
    } else {
      for (int64_t i = b; i < e; ++i) y[i] = std::sqrt(x[i]);
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_pow(const OpContext& ctx) {
  const TensorInfo& ex = ctx.inputs[1];
  if (ctx.inputs[0].dtype == DType::kFloat32 && ex.value && ex.value->numel() == 1 &&
      ctx.outputs[0].shape == ctx.inputs[0].shape && ops::visit_any_float(ex.dtype, [](auto) {})) {
    const double k = ex.value->float_at(0);
    if (k == 2.0 || k == 3.0 || k == 1.0 || k == 0.5) {
      return make_kernel("pow_const", PowConstParams{static_cast<float>(k)}, run_pow_const);
    }
  }
  PowParams p{ctx.inputs[0].dtype, ctx.inputs[1].dtype,
              ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape})};
  if (!ops::visit_all_numeric(p.base, [](auto) {})) return ops::dtype_error(ctx, 0, "numeric types");
  if (!ops::visit_all_numeric(p.exp, [](auto) {})) return ops::dtype_error(ctx, 1, "numeric types");
  return make_kernel("reference", std::move(p), run_pow);
}

// ---- Where(cond, x, y): any element type ------------------------------------------------------

struct WhereParams {
  DType dtype;
  ops::BroadcastRows rows;
};

Status infer_where(OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kBool) {
    return invalid_model(ctx.where, ": condition must be bool, got ",
                         dtype_name(ctx.inputs[0].dtype));
  }
  TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 1, 2));
  TERN_ASSIGN_OR_RETURN(Shape out, broadcast_all(ctx));
  ctx.set_output(0, ctx.inputs[1].dtype, out);
  return Status::ok();
}

Status run_where(const WhereParams& p, const KernelArgs& a, const ExecContext& exec) {
  ops::visit_by_size(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const uint8_t* c = a.inputs[0]->data<uint8_t>();
    const T* x = a.inputs[1]->data<T>();
    const T* y = a.inputs[2]->data<T>();
    T* out = a.outputs[0]->data<T>();
    ops::broadcast_for_each<3>(p.rows, exec.num_threads, [&](int64_t o, const int64_t* off) {
      out[o] = c[off[0]] ? x[off[1]] : y[off[2]];
    });
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_where(const OpContext& ctx) {
  WhereParams p{ctx.inputs[1].dtype,
                ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape,
                                                           ctx.inputs[2].shape})};
  if (!ops::visit_by_size(p.dtype, [](auto) {})) return ops::dtype_error(ctx, 1, "any fixed type");
  return make_kernel("reference", std::move(p), run_where);
}

// ---- variadic Max / Min / Sum / Mean ------------------------------------------------------------

enum class Var { kMax, kMin, kSum, kMean };

struct VarParams {
  Var op;
  DType dtype;
  Shape out;
  std::vector<ops::BroadcastRows> rows;  // (output, input k) for k >= 1
  ops::BroadcastRows first;              // input 0 -> output
};

Status run_var(const VarParams& p, const KernelArgs& a, const ExecContext& exec) {
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = a.outputs[0]->data<T>();
    const T* x0 = a.inputs[0]->data<T>();
    ops::broadcast_for_each<1>(p.first, exec.num_threads,
                               [&](int64_t o, const int64_t* off) { y[o] = x0[off[0]]; });
    for (size_t k = 1; k < a.inputs.size(); ++k) {
      const T* xk = a.inputs[k]->data<T>();
      ops::broadcast_for_each<2>(p.rows[k - 1], exec.num_threads,
                                 [&](int64_t o, const int64_t* off) {
                                   const T u = y[off[0]], v = xk[off[1]];
                                   if constexpr (ops::is_float_like_v<T>) {
                                     const double du = ops::as_double(u), dv = ops::as_double(v);
                                     if (std::isnan(du) || std::isnan(dv)) {
                                       if (p.op == Var::kMax || p.op == Var::kMin) {
                                         y[o] = std::isnan(du) ? u : v;
                                         return;
                                       }
                                     }
                                   }
                                   switch (p.op) {
                                     case Var::kMax:
                                       y[o] = u < v ? v : u;
                                       break;
                                     case Var::kMin:
                                       y[o] = v < u ? v : u;
                                       break;
                                     default:
                                       y[o] = static_cast<T>(u + v);
                                   }
                                 });
    }
    if (p.op == Var::kMean) {
      const double n = static_cast<double>(a.inputs.size());
      for (int64_t i = 0; i < a.outputs[0]->numel(); ++i) {
        y[i] = ops::from_double<T>(ops::as_double(y[i]) / n);
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_var(const OpContext& ctx, Var op) {
  VarParams p{op, ctx.inputs[0].dtype, ctx.outputs[0].shape, {}, {}};
  const bool floats_only = op == Var::kMean;
  if (floats_only ? !ops::visit_any_float(p.dtype, [](auto) {})
                  : !ops::visit_all_numeric(p.dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, floats_only ? "float types" : "numeric types");
  }
  p.first = ops::plan_broadcast(p.out, {ctx.inputs[0].shape});
  for (size_t k = 1; k < ctx.num_inputs(); ++k) {
    p.rows.push_back(ops::plan_broadcast(p.out, {p.out, ctx.inputs[k].shape}));
  }
  return make_kernel("reference", std::move(p), run_var);
}

template <Var Op>
Expected<std::unique_ptr<Kernel>> make_var(const OpContext& ctx) {
  return make_var(ctx, Op);
}

}  // namespace

TERN_REGISTRATION void register_op_elementwise(OpRegistry& r) {
  r.add({"Equal", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kEq>, {}, attrs({})});
  r.add({"Less", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kLt>, {}, attrs({})});
  r.add({"Greater", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kGt>, {}, attrs({})});
  r.add({"LessOrEqual", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kLe>, {}, attrs({})});
  r.add({"GreaterOrEqual", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kGe>, {}, attrs({})});
  r.add({"And", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kAnd>, {}, attrs({})});
  r.add({"Or", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kOr>, {}, attrs({})});
  r.add({"Xor", 2, 2, 1, 1, infer_cmp, make_cmp<Cmp::kXor>, {}, attrs({})});
  r.add({"BitwiseAnd", 2, 2, 1, 1, infer_same_type, make_bin<Bin::kBitAnd>, {}, attrs({})});
  r.add({"BitwiseOr", 2, 2, 1, 1, infer_same_type, make_bin<Bin::kBitOr>, {}, attrs({})});
  r.add({"BitwiseXor", 2, 2, 1, 1, infer_same_type, make_bin<Bin::kBitXor>, {}, attrs({})});
  r.add({"BitShift", 2, 2, 1, 1, infer_same_type, make_bin<Bin::kShift>, {}, attrs("direction")});
  r.add({"Mod", 2, 2, 1, 1, infer_same_type, make_bin<Bin::kMod>, {}, attrs("fmod")});
  r.add({"PRelu", 2, 2, 1, 1, infer_same_type, make_bin<Bin::kPRelu>, {}, attrs({})});
  r.add({"Pow", 2, 2, 1, 1, infer_pow, make_pow, {}, attrs({})});
  r.add({"Where", 3, 3, 1, 1, infer_where, make_where, {}, attrs({})});
  r.add({"Max", 1, 1 << 20, 1, 1, infer_same_type, make_var<Var::kMax>, {}, attrs({})});
  r.add({"Min", 1, 1 << 20, 1, 1, infer_same_type, make_var<Var::kMin>, {}, attrs({})});
  r.add({"Sum", 1, 1 << 20, 1, 1, infer_same_type, make_var<Var::kSum>, {}, attrs({})});
  r.add({"Mean", 1, 1 << 20, 1, 1, infer_same_type, make_var<Var::kMean>, {}, attrs({})});
}

}  // namespace tern
