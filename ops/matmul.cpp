#include "ops/matmul.h"

#include <algorithm>

#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

Expected<MatMulParams> parse_matmul(const OpContext& ctx) {
  if (!visit_any_float(ctx.inputs[0].dtype, [](auto) {})) return dtype_error(ctx, 0, "float types");
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 1));
  // (Read in place, without copies: every plan for a new shape parses every MatMul again.)
  const Shape& a = ctx.inputs[0].shape;
  const Shape& b = ctx.inputs[1].shape;
  if (a.empty() || b.empty()) return invalid_argument("MatMul inputs must have rank >= 1");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  MatMulParams p;
  p.M = a_vec ? 1 : a[a.size() - 2];
  p.K = a.back();
  p.N = b_vec ? 1 : b.back();
  if ((b_vec ? b[0] : b[b.size() - 2]) != p.K) {
    return invalid_argument("inner dims differ: '", ctx.input_names[0], "' ",
                            shape_str(ctx.inputs[0].shape), " and '", ctx.input_names[1], "' ",
                            shape_str(ctx.inputs[1].shape));
  }
  // Batch dims: all but the last two (none for a vector), broadcast against each other.
  const size_t ra = a_vec ? 0 : a.size() - 2, rb = b_vec ? 0 : b.size() - 2;
  const size_t r = std::max(ra, rb);
  p.out.reserve(r + 2);
  int64_t na = 1, nbb = 1, nb = 1;
  bool a_full = ra == r, b_full = rb == r;  // a batch dim equal to the output's everywhere
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
    const int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
    if (da != db && da != 1 && db != 1) {
      Shape a_batch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(ra));
      Shape b_batch(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(rb));
      return invalid_argument("batch dims of '", ctx.input_names[0], "' and '", ctx.input_names[1],
                              "': ", broadcast_shapes(a_batch, b_batch).status().message());
    }
    const int64_t d = da == 1 ? db : da;
    p.out.push_back(d);
    na *= da;
    nbb *= db;
    nb *= d;
    a_full = a_full && da == d;
    b_full = b_full && db == d;
  }
  if (nb > 0 && (na == 1 || a_full) && (nbb == 1 || b_full)) {
    // The common cases (one batch, equal batches, one side shared: a projection by a weight
    // matrix) need no broadcast plan.
    p.a_offsets.resize(static_cast<size_t>(nb));
    p.b_offsets.resize(static_cast<size_t>(nb));
    for (int64_t i = 0; i < nb; ++i) {
      p.a_offsets[static_cast<size_t>(i)] = na == 1 ? 0 : i * p.M * p.K;
      p.b_offsets[static_cast<size_t>(i)] = nbb == 1 ? 0 : i * p.K * p.N;
    }
  } else if (nb > 0) {
    const Shape a_batch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(ra));
    const Shape b_batch(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(rb));
    BroadcastRows br = plan_broadcast(p.out, {a_batch, b_batch});
    // Walk every batch index; BroadcastRows gives each input's element offset per position.
    for (int64_t row = 0; row < br.rows; ++row) {
      int64_t off[2];
      br.row_offsets(row, off);
      for (int64_t i = 0; i < br.inner; ++i) {
        p.a_offsets.push_back((off[0] + i * br.in_strides[0].back()) * p.M * p.K);
        p.b_offsets.push_back((off[1] + i * br.in_strides[1].back()) * p.K * p.N);
      }
    }
  }
  if (!a_vec) p.out.push_back(p.M);
  if (!b_vec) p.out.push_back(p.N);
  return p;
}

void matmul_reference(const MatMulParams& p, const float* a, const float* b, float* y) {
  for (size_t m = 0; m < p.a_offsets.size(); ++m) {
    const float* A = a + p.a_offsets[m];
    const float* B = b + p.b_offsets[m];
    float* Y = y + static_cast<int64_t>(m) * p.M * p.N;
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < p.K; ++k)
          acc += static_cast<double>(A[i * p.K + k]) * B[k * p.N + j];
        Y[i * p.N + j] = static_cast<float>(acc);
      }
  }
}

Expected<GemmParams> parse_gemm(const OpContext& ctx) {
  if (!visit_any_float(ctx.inputs[0].dtype, [](auto) {})) return dtype_error(ctx, 0, "float types");
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 1));
  const Shape &a = ctx.inputs[0].shape, &b = ctx.inputs[1].shape;
  if (a.size() != 2 || b.size() != 2) {
    return invalid_argument("Gemm inputs must be matrices, got ", shape_str(a), " and ",
                            shape_str(b));
  }
  GemmParams p;
  TERN_ASSIGN_OR_RETURN(int64_t ta, ctx.attrs().get_int("transA", 0));
  TERN_ASSIGN_OR_RETURN(int64_t tb, ctx.attrs().get_int("transB", 0));
  TERN_ASSIGN_OR_RETURN(p.alpha, ctx.attrs().get_float("alpha", 1.0f));
  TERN_ASSIGN_OR_RETURN(p.beta, ctx.attrs().get_float("beta", 1.0f));
  p.trans_a = ta != 0;
  p.trans_b = tb != 0;
  p.M = p.trans_a ? a[1] : a[0];
  p.K = p.trans_a ? a[0] : a[1];
  p.N = p.trans_b ? b[0] : b[1];
  if ((p.trans_b ? b[1] : b[0]) != p.K) {
    return invalid_argument("inner dims differ: '", ctx.input_names[0], "' ", shape_str(a),
                            " and '", ctx.input_names[1], "' ", shape_str(b));
  }
  if (ctx.has_input(2)) {
    TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 2));
    p.c_shape = ctx.inputs[2].shape;
    auto bc = broadcast_shapes(p.c_shape, {p.M, p.N});
    if (!bc || *bc != Shape{p.M, p.N} || p.c_shape.size() > 2) {
      return invalid_argument("C '", ctx.input_names[2], "' ", shape_str(p.c_shape),
                              " does not broadcast to [", p.M, ",", p.N, "]");
    }
  }
  return p;
}

void gemm_fill_bias(const GemmParams& p, const float* c, float* y) {
  const size_t r = p.c_shape.size();
  const int64_t cm = r == 2 ? p.c_shape[0] : 1;
  const int64_t cn = r >= 1 ? p.c_shape[r - 1] : 1;
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      y[i * p.N + j] = c ? p.beta * c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)] : 0.0f;
    }
}

void gemm_reference(const GemmParams& p, const float* a, const float* b, const float* c, float* y) {
  gemm_fill_bias(p, c, y);
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        const float av = p.trans_a ? a[k * p.M + i] : a[i * p.K + k];
        const float bv = p.trans_b ? b[j * p.K + k] : b[k * p.N + j];
        acc += static_cast<double>(av) * bv;
      }
      y[i * p.N + j] += static_cast<float>(p.alpha * acc);
    }
}

}  // namespace ops

namespace {

Status infer_matmul(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::MatMulParams p, ops::parse_matmul(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, p.out);
  return Status::ok();
}

Status infer_gemm(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::GemmParams p, ops::parse_gemm(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, {p.M, p.N});
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_matmul(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::MatMulParams p, ops::parse_matmul(ctx));
  return make_kernel(
      "reference", std::move(p),
      [](const ops::MatMulParams& q, const KernelArgs& a, const ExecContext&) {
        if (a.inputs[0]->dtype() == DType::kFloat32) {
          ops::matmul_reference(q, a.inputs[0]->data<float>(), a.inputs[1]->data<float>(),
                                a.outputs[0]->data<float>());
          return Status::ok();
        }
        // Other float types: float32 in, float32 accumulation (in double), back.
        const auto x = ops::to_float32(*a.inputs[0]), w = ops::to_float32(*a.inputs[1]);
        std::vector<float> y(static_cast<size_t>(a.outputs[0]->numel()));
        ops::matmul_reference(q, x.data(), w.data(), y.data());
        ops::from_float32(y, *a.outputs[0]);
        return Status::ok();
      });
}

Expected<std::unique_ptr<Kernel>> make_gemm(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::GemmParams p, ops::parse_gemm(ctx));
  return make_kernel(
      "reference", std::move(p),
      [](const ops::GemmParams& q, const KernelArgs& a, const ExecContext&) {
        const bool has_c = a.inputs.size() > 2 && a.inputs[2];
        if (a.inputs[0]->dtype() == DType::kFloat32) {
          const float* c = has_c ? a.inputs[2]->data<float>() : nullptr;
          ops::gemm_reference(q, a.inputs[0]->data<float>(), a.inputs[1]->data<float>(), c,
                              a.outputs[0]->data<float>());
          return Status::ok();
        }
        const auto x = ops::to_float32(*a.inputs[0]), w = ops::to_float32(*a.inputs[1]);
        const auto c = has_c ? ops::to_float32(*a.inputs[2]) : std::vector<float>();
        std::vector<float> y(static_cast<size_t>(a.outputs[0]->numel()));
        ops::gemm_reference(q, x.data(), w.data(), has_c ? c.data() : nullptr, y.data());
        ops::from_float32(y, *a.outputs[0]);
        return Status::ok();
      });
}

}  // namespace

TERN_REGISTRATION void register_op_matmul(OpRegistry& r) {
  r.add({"MatMul", 2, 2, 1, 1, infer_matmul, make_matmul, {}, attrs({})});
  r.add({"Gemm", 2, 3, 1, 1, infer_gemm, make_gemm, {}, attrs("alpha, beta, transA, transB")});
}

}  // namespace tern
