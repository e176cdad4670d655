// Cast and CastLike between every tensor type: numeric, bool, float16, bfloat16, strings, the
// float8/float4/e8m0 types (saturate, round_mode) and the 4/2-bit integers (modular). Float to
// integer truncates toward zero and saturates at the target's limits (NaN gives 0), so no input is
// undefined behaviour.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "core/half.h"
#include "core/low_float.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct CastParams {
  DType from, to;
  bool saturate = true;
  int e8m0_round = 1;  // FLOAT8E8M0: -1 down, 0 nearest, 1 up (ONNX's default)
};

bool castable(DType t) {
  return ops::visit_numeric(t, [](auto) {}) || t == DType::kBool || t == DType::kFloat16 ||
         t == DType::kBFloat16 || dtype_is_low_float(t) || t == DType::kInt4 ||
         t == DType::kUInt4 || t == DType::kInt2 || t == DType::kUInt2 || t == DType::kString;
}

Status infer_cast(OpContext& ctx) {
  int64_t to = 0;
  if (ctx.node->op_type == "CastLike") {
    to = static_cast<int64_t>(ctx.inputs[1].dtype);
  } else {
    TERN_ASSIGN_OR_RETURN(to, ctx.attrs().get_int("to", 0));
  }
  if (!dtype_is_valid(static_cast<int32_t>(to))) {
    return invalid_model("attribute 'to' is not a valid dtype (", to, ")");
  }
  ctx.set_output(0, static_cast<DType>(to), ctx.inputs[0].shape);
  return Status::ok();
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// One element in flight: integers keep all 64 bits, everything else travels as a double.
struct Scalar {
  bool integral = false;
  int64_t i = 0;
  double f = 0;
  double as_double() const { return integral ? static_cast<double>(i) : f; }
  int64_t as_int() const {
    if (integral) return i;
    if (std::isnan(f)) return 0;
    return f <= -9.2e18 ? INT64_MIN : f >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(f);
  }
};

Scalar load(const Tensor& in, int64_t i) {
  const DType t = in.dtype();
  Scalar s;
  if (t == DType::kString) {
    const std::string& str = in.data<std::string>()[i];
    s.f = std::strtod(str.c_str(), nullptr);
  } else if (dtype_is_float(t) || dtype_is_low_float(t)) {
    s.f = in.float_at(i);
  } else {
    s.integral = true, s.i = in.int_at(i);
  }
  return s;
}

std::string to_text(const Scalar& v, DType from) {
  if (v.integral) return std::to_string(v.i);
  if (std::isnan(v.f)) return "NaN";
  if (std::isinf(v.f)) return v.f > 0 ? "INF" : "-INF";
  char buf[64];
  // The shortest text that reads back as the same value of the source type.
  auto r = from == DType::kFloat64 ? std::to_chars(buf, buf + sizeof buf, v.f)
                                   : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v.f));
  return std::string(buf, r.ptr);
}

uint8_t to_e8m0(double x, int mode, bool saturate) {
  if (std::isnan(x)) return 0xff;
  if (x <= 0) return 0;
  if (std::isinf(x)) return saturate ? 0xfe : 0xff;
  int e = std::ilogb(x);
  const double lo = std::ldexp(1.0, e);
  if (x > lo) {
    if (mode > 0 || (mode == 0 && x >= lo * 1.5)) ++e;
  }
  if (e < -127) return 0;
  if (e > 127) return saturate ? 0xfe : 0xff;
  return static_cast<uint8_t>(e + 127);
}

void store(const CastParams& p, Tensor& out, int64_t i, const Scalar& v) {
  const DType to = out.dtype();
  if (to == DType::kBool) {
    out.data<uint8_t>()[i] = v.integral ? v.i != 0 : v.f != 0.0;
  } else if (to == DType::kFloat16) {
    out.data<uint16_t>()[i] = float_to_half(static_cast<float>(v.as_double()));
  } else if (to == DType::kBFloat16) {
    out.data<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(v.as_double()));
  } else if (to == DType::kFloat8E8M0) {
    out.data<uint8_t>()[i] = to_e8m0(v.as_double(), p.e8m0_round, p.saturate);
  } else if (dtype_is_low_float(to)) {
    out.data<uint8_t>()[i] = float_to_low_float(to, static_cast<float>(v.as_double()), p.saturate);
  } else if (to == DType::kInt4 || to == DType::kInt2 || to == DType::kUInt4 ||
             to == DType::kUInt2) {
    // Modular like every integer cast: keep the low bits (sign-extended for the signed types).
    const int bits = dtype_file_bits(to);
    const uint64_t low = static_cast<uint64_t>(v.as_int()) & ((1u << bits) - 1);
    int64_t r = static_cast<int64_t>(low);
    if (dtype_is_signed_int(to) && (low >> (bits - 1))) r -= int64_t{1} << bits;
    out.data<uint8_t>()[i] = static_cast<uint8_t>(static_cast<int8_t>(r));
  } else if (to == DType::kString) {
    out.data<std::string>()[i] = to_text(v, p.from);
  } else {
    ops::visit_numeric(to, [&](auto tag) {
      using T = decltype(tag);
      if (v.integral && std::is_integral_v<T>) {
        out.data<T>()[i] = static_cast<T>(v.i);  // modular, as C and ONNX do
      } else {
        out.data<T>()[i] = from_double<T>(v.as_double());
      }
    });
  }
}

Status run_cast(const CastParams& p, const KernelArgs& a, const ExecContext& exec) {
  const Tensor& in = *a.inputs[0];
  Tensor& out = *a.outputs[0];
  const int threads = p.to == DType::kString || p.from == DType::kString ? 1 : exec.num_threads;
  parallel_for(in.numel(), 16384, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) store(p, out, i, load(in, i));
  });
  return Status::ok();
}

// The common casts as typed loops the compiler vectorises (the general path above goes through a
// scalar of either kind per element): same type (a copy), integers and bool to floats, float to
// double and back, integers to integers (modular), and any of these to bool.
struct BoolByte {};  // bool, stored as one byte 0 or 1
template <class T>
using Stored = std::conditional_t<std::is_same_v<T, BoolByte>, uint8_t, T>;

template <class From, class To>
void convert(const Stored<From>* in, Stored<To>* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, BoolByte>) {
      out[i] = in[i] != 0;
    } else {
      out[i] = static_cast<To>(in[i]);
    }
  }
}

// bool or a numeric type of C++ (not float16, bfloat16 or the 8/4/2-bit types).
template <class T>
bool visit_fast(DType t, T&& fn) {
  if (t != DType::kBool) return ops::visit_numeric(t, fn);
  if (!dtype_built(DType::kBool)) return false;  // (a selective build without bool)
  fn(BoolByte{});
  return true;
}

bool fast_cast(DType from, DType to) {
  if (from == to) return from != DType::kString;
  const bool from_float = from == DType::kFloat32 || from == DType::kFloat64;
  const bool to_float = to == DType::kFloat32 || to == DType::kFloat64;
  if (to_float && from != DType::kBool && !from_float && dtype_size(from) > 4) {
    // 64-bit integers to float round as the general path does (through double).
    return to == DType::kFloat64 && visit_fast(from, [](auto) {});
  }
  // Floats to integers keep the general path (its NaN and out-of-range handling).
  if (from_float && !to_float && to != DType::kBool) return false;
  return visit_fast(from, [](auto) {}) && visit_fast(to, [](auto) {});
}

Status run_fast_cast(const CastParams& p, const KernelArgs& a, const ExecContext& exec) {
  const Tensor& in = *a.inputs[0];
  Tensor& out = *a.outputs[0];
  if (p.from == p.to) {
    if (out.raw() != in.raw()) std::memcpy(out.raw(), in.raw(), in.byte_size());
    return Status::ok();
  }
  visit_fast(p.from, [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_fast(p.to, [&](auto to_tag) {
      using To = decltype(to_tag);
      const auto* x = static_cast<const Stored<From>*>(in.raw());
      auto* y = static_cast<Stored<To>*>(out.raw());
      parallel_for(in.numel(), 65536, exec.num_threads,
                   [&](int64_t b, int64_t e) { convert<From, To>(x + b, y + b, e - b); });
    });
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_cast(const OpContext& ctx) {
  CastParams p{ctx.inputs[0].dtype, ctx.outputs[0].dtype};
  if (fast_cast(p.from, p.to)) return make_kernel("cast", p, run_fast_cast);
  if (!castable(p.from)) return ops::dtype_error(ctx, 0, "every tensor type");
  if (!castable(p.to)) return unsupported("cast to ", dtype_name(p.to), " is not supported");
  TERN_ASSIGN_OR_RETURN(int64_t sat, ctx.attrs().get_int("saturate", 1));
  p.saturate = sat != 0;
  TERN_ASSIGN_OR_RETURN(std::string mode, ctx.attrs().get_string("round_mode", "up"));
  if (mode == "up") {
    p.e8m0_round = 1;
  } else if (mode == "down") {
    p.e8m0_round = -1;
  } else if (mode == "nearest") {
    p.e8m0_round = 0;
  } else {
    return invalid_model(ctx.where, ": round_mode must be up, down or nearest, got '", mode, "'");
  }
  return make_kernel("reference", p, run_cast);
}

// BitCast (opset 26): the same bits read as another type of the same width.
Status infer_bitcast(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t to, ctx.attrs().get_int("to", 0));
  if (!dtype_is_valid(static_cast<int32_t>(to))) {
    return invalid_model(ctx.where, ": attribute 'to' is not a valid dtype (", to, ")");
  }
  const DType from = ctx.inputs[0].dtype, dt = static_cast<DType>(to);
  if (from == DType::kString || dt == DType::kString ||
      dtype_file_bits(from) != dtype_file_bits(dt)) {
    return invalid_model(ctx.where, ": BitCast needs types of the same width, got ",
                         dtype_name(from), " to ", dtype_name(dt));
  }
  ctx.set_output(0, dt, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_bitcast(const int&, const KernelArgs& a, const ExecContext&) {
  std::memcpy(a.outputs[0]->raw(), a.inputs[0]->raw(), a.inputs[0]->byte_size());
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_bitcast(const OpContext& ctx) {
  if (ctx.outputs[0].dtype == DType::kBool) {
    return unsupported(ctx.where, ": BitCast to bool (bytes other than 0 and 1 are not bools)");
  }
  return make_kernel("reference", 0, run_bitcast);
}

}  // namespace

TERN_REGISTRATION void register_op_cast(OpRegistry& r) {
  r.add({"BitCast", 1, 1, 1, 1, infer_bitcast, make_bitcast, {}, attrs("to")});
  r.add({"Cast", 1, 1, 1, 1, infer_cast, make_cast, {}, attrs("round_mode, saturate, to")});
  r.add({"CastLike", 2, 2, 1, 1, infer_cast, make_cast, {}, attrs("round_mode, saturate")});
}

}  // namespace tern
