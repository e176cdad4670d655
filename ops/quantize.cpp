// Linear quantisation: QuantizeLinear and DequantizeLinear (per tensor, per axis, or blocked;
// int8/uint8/int16/uint16/int32, the 4- and 2-bit integers and the float8 types; saturate),
// DynamicQuantizeLinear, QLinearMatMul (and Tern's FusedQLinearMatMul: with an int32 bias) and
// MatMulInteger. Reference arithmetic in double with round-half-to-even, as ONNX specifies.
#include <cmath>

#include "core/low_float.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

double load(const Tensor& t, int64_t i) {
  return t.float_at(i);
}

bool int_range(DType d, double* lo, double* hi) {
  switch (d) {
    case DType::kInt8:
      *lo = -128, *hi = 127;
      return true;
    case DType::kUInt8:
      *lo = 0, *hi = 255;
      return true;
    case DType::kInt16:
      *lo = -32768, *hi = 32767;
      return true;
    case DType::kUInt16:
      *lo = 0, *hi = 65535;
      return true;
    case DType::kInt32:
      *lo = -2147483648.0, *hi = 2147483647.0;
      return true;
    case DType::kInt4:
      *lo = -8, *hi = 7;
      return true;
    case DType::kUInt4:
      *lo = 0, *hi = 15;
      return true;
    case DType::kInt2:
      *lo = -2, *hi = 1;
      return true;
    case DType::kUInt2:
      *lo = 0, *hi = 3;
      return true;
    default:
      return false;
  }
}

// Stores v (already divided by the scale, zero point added) into element i of a quantised type.
void store_quantized(Tensor& t, int64_t i, double v, bool saturate) {
  const DType d = t.dtype();
  if (dtype_is_low_float(d)) {
    t.data<uint8_t>()[i] = float_to_low_float(d, static_cast<float>(v), saturate);
    return;
  }
  double lo = 0, hi = 0;
  int_range(d, &lo, &hi);
  const double q = std::min(hi, std::max(lo, std::nearbyint(v)));
  switch (d) {
    case DType::kInt8:
    case DType::kInt4:
    case DType::kInt2:
      t.data<int8_t>()[i] = static_cast<int8_t>(q);
      break;
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kUInt2:
      t.data<uint8_t>()[i] = static_cast<uint8_t>(q);
      break;
    case DType::kInt16:
      t.data<int16_t>()[i] = static_cast<int16_t>(q);
      break;
    case DType::kUInt16:
      t.data<uint16_t>()[i] = static_cast<uint16_t>(q);
      break;
    case DType::kInt32:
      t.data<int32_t>()[i] = static_cast<int32_t>(q);
      break;
    default:
      break;
  }
}

void store_float(Tensor& t, int64_t i, double v) {
  ops::visit_any_float(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    t.data<T>()[i] = ops::from_double<T>(v);
  });
}

bool quantized_type(DType d) {
  double lo, hi;
  return int_range(d, &lo, &hi) || (dtype_is_low_float(d) && d != DType::kFloat8E8M0);
}

// Which scale / zero-point element applies to each element of x.
struct ScaleMap {
  int64_t axis = 0, block = 0;
  Shape x, s;  // shapes of x and of the scale
  int64_t index(const std::vector<int64_t>& pos) const {
    if (s.empty() || numel(s) == 1) return 0;
    if (s.size() == 1 && block == 0) return pos[static_cast<size_t>(axis)];
    int64_t off = 0;  // blocked: scale has x's rank, dim `axis` divided into blocks
    for (size_t d = 0; d < x.size(); ++d) {
      const int64_t p = static_cast<int64_t>(d) == axis ? pos[d] / block : pos[d];
      off = off * s[d] + p;
    }
    return off;
  }
};

Expected<ScaleMap> scale_map(const OpContext& ctx) {
  ScaleMap m;
  m.x = ctx.inputs[0].shape;
  m.s = ctx.inputs[1].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 1));
  TERN_ASSIGN_OR_RETURN(m.block, ctx.attrs().get_int("block_size", 0));
  if (numel(m.s) == 1) return m;
  TERN_ASSIGN_OR_RETURN(m.axis, ops::normalize_axis(axis, static_cast<int64_t>(m.x.size())));
  if (m.block > 0) {
    if (m.s.size() != m.x.size()) return invalid_model(ctx.where, ": blocked scale needs x's rank");
    return m;
  }
  if (m.s.size() != 1 || m.s[0] != m.x[static_cast<size_t>(m.axis)]) {
    return invalid_model(ctx.where, ": scale of shape ", shape_str(m.s),
                         " is neither a scalar nor one value per index of axis ", m.axis);
  }
  return m;
}

// ---- QuantizeLinear ---------------------------------------------------------------------------

struct QParams {
  ScaleMap map;
  bool saturate;
};

Status infer_quantize(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t od, ctx.attrs().get_int("output_dtype", 0));
  DType out = DType::kUInt8;
  if (ctx.has_input(2)) {
    out = ctx.inputs[2].dtype;
  } else if (od != 0) {
    out = static_cast<DType>(od);
  }
  if (!quantized_type(out)) return unsupported(ctx.where, ": quantising to ", dtype_name(out));
  ctx.set_output(0, out, ctx.inputs[0].shape);
  return Status::ok();
}

// x / scale in the precision ONNX's reference divides in (numpy's: float32 by float32 is a float32
// quotient, float16 by float16 a float16 one): a quotient rounded once more than in double may
// land on a .5 that round-half-to-even then decides (0.5 / (5 / 255) is 25.5 in float32).
double quotient(const Tensor& x, int64_t i, const Tensor& s, int64_t k) {
  const DType a = x.dtype(), b = s.dtype();
  if (a == DType::kFloat64 || b == DType::kFloat64 || !dtype_is_float(a)) {
    return load(x, i) / load(s, k);
  }
  const float q = static_cast<float>(load(x, i)) / static_cast<float>(load(s, k));
  if (a == b && a == DType::kFloat16) return static_cast<float>(ops::Float16(q));
  if (a == b && a == DType::kBFloat16) return static_cast<float>(ops::BFloat16(q));
  return q;
}

Status run_quantize(const QParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor& s = *a.inputs[1];
  const Tensor* zp = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  Tensor& y = *a.outputs[0];
  ops::for_each_index(p.map.x, [&](int64_t i, const std::vector<int64_t>& pos) {
    const int64_t k = p.map.index(pos);
    const double z = zp ? load(*zp, k) : 0.0;
    double v = quotient(x, i, s, k);
    if (!dtype_is_low_float(y.dtype())) v = std::nearbyint(v);
    store_quantized(y, i, v + z, p.saturate);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_quantize(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ScaleMap m, scale_map(ctx));
  TERN_ASSIGN_OR_RETURN(int64_t sat, ctx.attrs().get_int("saturate", 1));
  return make_kernel("reference", QParams{m, sat != 0}, run_quantize);
}

// ---- DequantizeLinear -------------------------------------------------------------------------

Status infer_dequantize(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t od, ctx.attrs().get_int("output_dtype", 0));
  const DType out = od != 0 ? static_cast<DType>(od) : ctx.inputs[1].dtype;
  if (!ops::visit_any_float(out, [](auto) {}))
    return unsupported(ctx.where, ": output ", dtype_name(out));
  ctx.set_output(0, out, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_dequantize(const QParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const Tensor& s = *a.inputs[1];
  const Tensor* zp = a.inputs.size() > 2 ? a.inputs[2] : nullptr;
  ops::for_each_index(p.map.x, [&](int64_t i, const std::vector<int64_t>& pos) {
    const int64_t k = p.map.index(pos);
    const double z = zp ? load(*zp, k) : 0.0;
    store_float(*a.outputs[0], i, (load(x, i) - z) * load(s, k));
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_dequantize(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  const DType d = ctx.inputs[0].dtype;
  if (!quantized_type(d) && d != DType::kFloat8E8M0) {
    return ops::dtype_error(ctx, 0, "the quantised types");
  }
  TERN_ASSIGN_OR_RETURN(ScaleMap m, scale_map(ctx));
  return make_kernel("reference", QParams{m, true}, run_dequantize);
}

// ---- DynamicQuantizeLinear --------------------------------------------------------------------

Status infer_dynq(OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  ctx.set_output(0, DType::kUInt8, ctx.inputs[0].shape);
  ctx.set_output(1, DType::kFloat32, {});
  ctx.set_output(2, DType::kUInt8, {});
  return Status::ok();
}

Status run_dynq(const int&, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  double lo = 0, hi = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, x.float_at(i));
    hi = std::max(hi, x.float_at(i));
  }
  const float scale = static_cast<float>((hi - lo) / 255.0);
  // float32 arithmetic, as the ONNX definition computes it
  const float zp =
      scale == 0
          ? 0.0f
          : std::min(255.0f, std::max(0.0f, std::nearbyint(-static_cast<float>(lo) / scale)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float q = scale == 0 ? zp : std::nearbyint(x.data<float>()[i] / scale) + zp;
    a.outputs[0]->data<uint8_t>()[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, q)));
  }
  if (a.outputs[1]) *a.outputs[1]->data<float>() = scale;
  if (a.outputs[2]) *a.outputs[2]->data<uint8_t>() = static_cast<uint8_t>(zp);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_dynq(const OpContext&) {
  return make_kernel("reference", 0, run_dynq);
}

// ---- QLinearMatMul / MatMulInteger: numpy matmul of dequantised operands ----------------------

struct MmShape {
  Shape out;
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> a_off, b_off;  // per output batch: offset of its A and B matrices
};

Expected<MmShape> matmul_shape(const OpContext& ctx, const Shape& a0, const Shape& b0) {
  Shape a = a0, b = b0;
  if (a.empty() || b.empty()) return invalid_model(ctx.where, ": matmul of a scalar");
  const bool va = a.size() == 1, vb = b.size() == 1;
  if (va) a.insert(a.begin(), 1);
  if (vb) b.push_back(1);
  MmShape r;
  r.m = a[a.size() - 2], r.k = a.back(), r.n = b.back();
  if (b[b.size() - 2] != r.k) {
    return invalid_model(ctx.where, ": inner dims differ: ", shape_str(a0), " x ", shape_str(b0));
  }
  const Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  TERN_ASSIGN_OR_RETURN(Shape batch, ops::broadcast_shapes(ab, bb));
  const size_t r_ = batch.size();
  auto offsets = [&](const Shape& s, int64_t mat) {
    Shape al(r_, 1);
    for (size_t i = 0; i < s.size(); ++i) al[r_ - s.size() + i] = s[i];
    std::vector<int64_t> offs;
    ops::for_each_index(batch, [&](int64_t, const std::vector<int64_t>& pos) {
      int64_t o = 0;
      for (size_t d = 0; d < r_; ++d) o = o * al[d] + (al[d] == 1 ? 0 : pos[d]);
      offs.push_back(o * mat);
    });
    if (offs.empty() && numel(batch) == 1) offs.push_back(0);
    return offs;
  };
  r.a_off = offsets(ab, r.m * r.k);
  r.b_off = offsets(bb, r.k * r.n);
  r.out = batch;
  if (!va) r.out.push_back(r.m);
  if (!vb) r.out.push_back(r.n);
  return r;
}

struct QmmParams {
  MmShape mm;
  bool integer;  // MatMulInteger: int32 output, no requantisation
};

Status infer_qmm(OpContext& ctx) {
  const bool integer = ctx.node->op_type == "MatMulInteger";
  const size_t bi = integer ? 1 : 3;
  TERN_ASSIGN_OR_RETURN(MmShape mm, matmul_shape(ctx, ctx.inputs[0].shape, ctx.inputs[bi].shape));
  // FusedQLinearMatMul's bias: int32, one value per column, in units of a_scale * b_scale.
  if (ctx.has_input(8)) {
    if (ctx.inputs[8].dtype != DType::kInt32) return ops::dtype_error(ctx, 8, "int32");
    const Shape& b = ctx.inputs[8].shape;
    if (b != Shape{mm.n} && b != Shape{1, mm.n}) {
      return invalid_argument("bias '", ctx.input_names[8], "' must be [", mm.n, "] or [1, ", mm.n,
                              "], got ", shape_str(b));
    }
  }
  ctx.set_output(0, integer ? DType::kInt32 : ctx.inputs[7].dtype, mm.out);
  return Status::ok();
}

// Zero point / scale value for row r of A (axis -2) or column c of B (axis -1).
double per(const Tensor* t, int64_t i, double fallback) {
  if (!t) return fallback;
  return t->numel() == 1 ? load(*t, 0) : load(*t, i);
}

Status run_qmm(const QmmParams& p, const KernelArgs& a, const ExecContext&) {
  const bool q = !p.integer;
  const Tensor& A = *a.inputs[0];
  const Tensor& B = *a.inputs[q ? 3 : 1];
  const Tensor* as = q ? a.inputs[1] : nullptr;
  const Tensor* az = q ? a.inputs[2] : (a.inputs.size() > 2 ? a.inputs[2] : nullptr);
  const Tensor* bs = q ? a.inputs[4] : nullptr;
  const Tensor* bz = q ? a.inputs[5] : (a.inputs.size() > 3 ? a.inputs[3] : nullptr);
  const Tensor* bias = q && a.inputs.size() > 8 ? a.inputs[8] : nullptr;
  Tensor& Y = *a.outputs[0];
  const auto& mm = p.mm;
  for (size_t bt = 0; bt < mm.a_off.size(); ++bt) {
    for (int64_t i = 0; i < mm.m; ++i) {
      for (int64_t j = 0; j < mm.n; ++j) {
        double acc = bias ? load(*bias, j) : 0.0;
        for (int64_t k = 0; k < mm.k; ++k) {
          const double av = load(A, mm.a_off[bt] + i * mm.k + k) - per(az, i, 0);
          const double bv = load(B, mm.b_off[bt] + k * mm.n + j) - per(bz, j, 0);
          acc += av * bv;
        }
        const int64_t o = (static_cast<int64_t>(bt) * mm.m + i) * mm.n + j;
        if (p.integer) {
          Y.data<int32_t>()[o] = static_cast<int32_t>(acc);
        } else {
          const double real = acc * per(as, i, 1) * per(bs, j, 1);
          const double v = real / load(*a.inputs[6], 0);
          store_quantized(
              Y, o, (dtype_is_low_float(Y.dtype()) ? v : std::nearbyint(v)) + load(*a.inputs[7], 0),
              true);
        }
      }
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_qmm(const OpContext& ctx) {
  const bool integer = ctx.node->op_type == "MatMulInteger";
  const size_t bi = integer ? 1 : 3;
  for (size_t i : {size_t{0}, bi}) {
    if (!quantized_type(ctx.inputs[i].dtype)) return ops::dtype_error(ctx, i, "quantised types");
  }
  TERN_ASSIGN_OR_RETURN(MmShape mm, matmul_shape(ctx, ctx.inputs[0].shape, ctx.inputs[bi].shape));
  return make_kernel("reference", QmmParams{std::move(mm), integer}, run_qmm);
}

}  // namespace

TERN_REGISTRATION void register_op_quantize(OpRegistry& r) {
  r.add(
      {"QuantizeLinear",
       2,
       3,
       1,
       1,
       infer_quantize,
       make_quantize,
       {},
       attrs("axis, block_size, output_dtype, saturate",
             {{"precision",
               "the division by y_scale runs in x's float type; another changes rounding only"}})});
  r.add({"DequantizeLinear",
         2,
         3,
         1,
         1,
         infer_dequantize,
         make_dequantize,
         {},
         attrs("axis, block_size, output_dtype")});
  r.add({"DynamicQuantizeLinear", 1, 1, 3, 3, infer_dynq, make_dynq, {}, attrs({})});
  r.add({"QLinearMatMul", 8, 8, 1, 1, infer_qmm, make_qmm, {}, attrs({})});
  // Tern's own, made by QDQ fusion of Gemm: QLinearMatMul plus an int32 bias [N] (input 8).
  r.add({"FusedQLinearMatMul", 9, 9, 1, 1, infer_qmm, make_qmm, {}, attrs({})});
  r.add({"MatMulInteger", 2, 4, 1, 1, infer_qmm, make_qmm, {}, attrs({})});
}

}  // namespace tern
