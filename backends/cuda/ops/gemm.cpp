// MatMul, Gemm and FusedMatMul on CUDA through cuBLASLt (fused bias / ReLU+bias epilogues) or
// cuBLAS, as cuda.preferred_blas_library says (DEFAULT: cuBLASLt where an epilogue can be fused,
// cuBLAS otherwise). float32 uses TF32 tensor cores only when cuda.matmul.allow_tf32; float16 and
// bfloat16 accumulate in float32, and split-K reductions in half precision happen only when
// cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction allow them. GELU is applied by
// Tern's exact (erf) epilogue kernel: cuBLASLt's GELU epilogue is the tanh approximation.
#include <algorithm>
#include <numeric>

#include "backends/cuda/ops/cuda_ops.h"
#include "core/kernel_registry.h"
#include "ops/fused_matmul.h"
#include "ops/matmul.h"

namespace tern::cuda {

namespace {

enum class Epi { kNone, kBias, kReluBias, kRelu };

// One row-major product, repeated over a strided batch:
//   Y[b] (M x N) = alpha * op(A[b]) * op(B[b]) + beta * Y[b]   (+ epilogue)
struct GemmDesc {
  int64_t M = 0, N = 0, K = 0;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0, ldy = 0;  // row-major leading dims
  int64_t batch = 1, sa = 0, sb = 0, sy = 0;
  float alpha = 1, beta = 0;
  DType dtype = DType::kFloat32;
  Epi epi = Epi::kNone;  // cuBLASLt-fused part of the epilogue
  ActChain post;         // applied by bias_act after the GEMM (with `post_bias`)
  bool post_bias = false;
  bool use_lt = true;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool allow_reduced = true;  // half-precision split-K reductions
  // The element offsets of A, B and Y between calls, gcd'ed (0: one call): they bound the
  // operands' alignment as the leading dims and batch strides do.
  int64_t step_a = 0, step_b = 0, step_y = 0;
  bool heuristic_ok = false;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

cudaDataType_t cuda_type(DType t) {
  return t == DType::kFloat16 ? CUDA_R_16F : t == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

int64_t alignment_of(int64_t elems, size_t es) {
  const int64_t b = elems * static_cast<int64_t>(es);
  int64_t a = 256;
  while (a > static_cast<int64_t>(es) && (b % a)) a /= 2;
  return a;
}

// cuBLASLt layouts and descriptors of one call (column-major view: Yᵀ = op(B)ᵀ op(A)ᵀ).
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, y = nullptr;  // of B, A, Y in cuBLAS's terms
  ~LtDescs() {
    if (op) (void)cublasLtMatmulDescDestroy(op);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (y) (void)cublasLtMatrixLayoutDestroy(y);
  }
};

Status make_lt_descs(const GemmDesc& g, const void* bias, LtDescs* d) {
  const cudaDataType_t t = cuda_type(g.dtype);
  TERN_CUDA_CHECK(cublasLtMatmulDescCreate(&d->op, g.compute, CUDA_R_32F));
  const cublasOperation_t opb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opa = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  TERN_CUDA_CHECK(
      cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &opb, sizeof(opb)));
  TERN_CUDA_CHECK(
      cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &opa, sizeof(opa)));
  if (g.epi != Epi::kNone) {
    const cublasLtEpilogue_t e = g.epi == Epi::kBias       ? CUBLASLT_EPILOGUE_BIAS
                                 : g.epi == Epi::kReluBias ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                           : CUBLASLT_EPILOGUE_RELU;
    TERN_CUDA_CHECK(
        cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    if (g.epi != Epi::kRelu) {
      TERN_CUDA_CHECK(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &bias, sizeof(bias)));
      const cudaDataType_t bt = t;
      TERN_CUDA_CHECK(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                     &bt, sizeof(bt)));
    }
  }
  // Column-major shapes: op(B)ᵀ is N x K, op(A)ᵀ is K x M, Yᵀ is N x M.
  const uint64_t b_rows = g.tb ? g.K : g.N, b_cols = g.tb ? g.N : g.K;
  const uint64_t a_rows = g.ta ? g.M : g.K, a_cols = g.ta ? g.K : g.M;
  TERN_CUDA_CHECK(cublasLtMatrixLayoutCreate(&d->a, t, b_rows, b_cols, g.ldb));
  TERN_CUDA_CHECK(cublasLtMatrixLayoutCreate(&d->b, t, a_rows, a_cols, g.lda));
  TERN_CUDA_CHECK(cublasLtMatrixLayoutCreate(&d->y, t, g.N, g.M, g.ldy));
  if (g.batch > 1) {
    const int32_t n = static_cast<int32_t>(g.batch);
    struct L {
      cublasLtMatrixLayout_t l;
      int64_t s;
    };
    for (L l : {L{d->a, g.sb}, L{d->b, g.sa}, L{d->y, g.sy}}) {
      TERN_CUDA_CHECK(
          cublasLtMatrixLayoutSetAttribute(l.l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof(n)));
      TERN_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(
          l.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.s, sizeof(l.s)));
    }
  }
  return Status::ok();
}

// Picks the cuBLASLt algorithm at prepare time (cuBLASLt's heuristic, for the flags' compute type
// and reduction schemes).
Status choose_lt_algo(GemmDesc& g) {
  TERN_ASSIGN_OR_RETURN(cublasLtHandle_t h, cublaslt_handle());
  LtDescs d;
  const float dummy = 0;
  TERN_RETURN_IF_ERROR(
      make_lt_descs(g, g.epi == Epi::kNone || g.epi == Epi::kRelu ? nullptr : &dummy, &d));
  cublasLtMatmulPreference_t pref = nullptr;
  TERN_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<void, void (*)(void*)> guard(pref, [](void* p) {
    (void)cublasLtMatmulPreferenceDestroy(static_cast<cublasLtMatmulPreference_t>(p));
  });
  const uint64_t ws = kGemmWorkspace;
  TERN_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  if (!g.allow_reduced) {
    // Split-K partial sums only in the compute type (float32), never in the output's half type.
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    TERN_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask)));
  }
  const size_t es = dtype_size(g.dtype);
  // Operands live at 64-byte-aligned offsets at least (256 in device arenas and allocations);
  // leading dims, batch strides and the offsets between calls can lower that.
  auto align = [&](int64_t ld, int64_t stride, int64_t step) {
    return static_cast<uint32_t>(
        std::min<int64_t>({64, alignment_of(ld, es), g.batch > 1 ? alignment_of(stride, es) : 256,
                           alignment_of(step, es)}));
  };
  const uint32_t al_a = align(g.ldb, g.sb, g.step_b);  // cuBLASLt's A is our B
  const uint32_t al_b = align(g.lda, g.sa, g.step_a);
  const uint32_t al_y = align(g.ldy, g.sy, g.step_y);
  TERN_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  TERN_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  TERN_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_y, sizeof(al_y)));
  TERN_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_y, sizeof(al_y)));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  TERN_CUDA_CHECK(
      cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.y, d.y, pref, 1, &res, &found));
  if (found == 0) return unsupported("cuBLASLt has no algorithm for this GEMM");
  g.algo = res.algo;
  g.workspace = res.workspaceSize;
  g.heuristic_ok = true;
  return Status::ok();
}

Status run_lt(const GemmDesc& g, const void* a, const void* b, const void* bias, void* y,
              void* ws) {
  TERN_ASSIGN_OR_RETURN(cublasLtHandle_t h, cublaslt_handle());
  LtDescs d;
  TERN_RETURN_IF_ERROR(make_lt_descs(g, bias, &d));
  const Status st = check(cublasLtMatmul(h, d.op, &g.alpha, b, d.a, a, d.b, &g.beta, y, d.y, y, d.y,
                                         &g.algo, ws, g.workspace, stream()),
                          "cublasLtMatmul");
  if (st.is_ok()) return st;
  // What cuBLASLt checks beyond the descriptors: the operands' and workspace's alignment.
  auto mod = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 256; };
  return st.with_prefix(str_cat("M ", g.M, " N ", g.N, " K ", g.K, " batch ", g.batch,
                                ", addresses mod 256: A ", mod(a), " B ", mod(b), " Y ", mod(y),
                                " workspace ", mod(ws), " (", g.workspace, " bytes): "));
}

Status run_cublas(const GemmDesc& g, const void* a, const void* b, void* y, void* ws) {
  TERN_ASSIGN_OR_RETURN(cublasHandle_t h, cublas_handle(ws));
  const cublasMath_t mode =
      g.allow_reduced ? CUBLAS_DEFAULT_MATH
                      : static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  TERN_CUDA_CHECK(cublasSetMathMode(h, mode));
  const cudaDataType_t t = cuda_type(g.dtype);
  TERN_CUDA_CHECK(cublasGemmStridedBatchedEx(
      h, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.N),
      static_cast<int>(g.M), static_cast<int>(g.K), &g.alpha, b, t, static_cast<int>(g.ldb), g.sb,
      a, t, static_cast<int>(g.lda), g.sa, &g.beta, y, t, static_cast<int>(g.ldy), g.sy,
      static_cast<int>(g.batch), g.compute, CUBLAS_GEMM_DEFAULT));
  return Status::ok();
}

// The flags' compute type and choices for a GEMM of dtype t.
Status apply_flags(const OpContext& ctx, bool fusable, GemmDesc& g) {
  if (g.dtype == DType::kFloat32) {
    g.compute =
        ctx.flag(FlagId::kCudaAllowTf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  } else if (g.dtype == DType::kFloat16) {
    g.compute = CUBLAS_COMPUTE_32F;
    g.allow_reduced = ctx.flag(FlagId::kCudaAllowFp16Reduced) != 0;
  } else if (g.dtype == DType::kBFloat16) {
    g.compute = CUBLAS_COMPUTE_32F;
    g.allow_reduced = ctx.flag(FlagId::kCudaAllowBf16Reduced) != 0;
  } else {
    return unsupported(ctx.where, ": CUDA GEMM of ", dtype_name(g.dtype));
  }
  const int64_t lib = ctx.flag(FlagId::kCudaBlasLibrary);  // 0 DEFAULT, 1 CUBLAS, 2 CUBLASLT
  g.use_lt = lib == 2 || (lib == 0 && fusable);
  if (!g.use_lt && g.epi != Epi::kNone) {
    // cuBLAS has no epilogue: the bias and ReLU move to the epilogue kernel.
    if (g.epi == Epi::kRelu || g.epi == Epi::kReluBias) {
      ActChain c = g.post;
      for (int i = c.n; i > 0; --i) c.steps[i] = c.steps[i - 1];
      c.steps[0] = ActStep{Act::kRelu, 0, 0};
      ++c.n;
      g.post = c;
    }
    g.post_bias = g.post_bias || g.epi == Epi::kBias || g.epi == Epi::kReluBias;
    g.epi = Epi::kNone;
  }
  if (g.use_lt) {
    Status st = choose_lt_algo(g);
    if (!st.is_ok()) {
      if (st.code() != Code::kUnsupported || lib == 2) return st.with_prefix(ctx.where);
      g.use_lt = false;  // DEFAULT falls back to cuBLAS
      return apply_flags(ctx, false, g);
    }
  }
  return Status::ok();
}

// A GEMM call and where its operands are: inputs by index, element offsets per repetition.
struct GemmKernelParams {
  GemmDesc g;
  std::vector<std::pair<int64_t, int64_t>> repeats = {{0, 0}};  // (A offset, B offset) per call
  int64_t y_step = 0;                                           // Y elements per call
  int bias_input = -1;  // input holding the bias (N values), for the epilogue
  int c_input = -1;     // Gemm's C when broadcast into Y before the product
  Strided c_copy;       // how C broadcasts into Y
};

class GemmKernel final : public Kernel {
 public:
  explicit GemmKernel(GemmKernelParams p) : p_(std::move(p)) {}
  const char* name() const override { return p_.g.use_lt ? "cublasLt" : "cublas"; }
  size_t workspace_bytes() const override {
    return p_.g.use_lt ? p_.g.workspace : kCublasWorkspace;
  }
  Status run(const KernelArgs& a, const ExecContext&) const override {
    const GemmDesc& g = p_.g;
    const size_t es = dtype_size(g.dtype);
    const auto* A = static_cast<const uint8_t*>(a.inputs[0]->raw());
    const auto* B = static_cast<const uint8_t*>(a.inputs[1]->raw());
    auto* Y = static_cast<uint8_t*>(a.outputs[0]->raw());
    const void* bias =
        p_.bias_input >= 0 ? a.inputs[static_cast<size_t>(p_.bias_input)]->raw() : nullptr;
    if (p_.c_input >= 0) {
      TERN_RETURN_IF_ERROR(launched(
          strided_copy(static_cast<int>(es), a.inputs[static_cast<size_t>(p_.c_input)]->raw(), Y,
                       p_.c_copy, stream()),
          "strided_copy"));
    }
    for (size_t r = 0; r < p_.repeats.size(); ++r) {
      const void* ar = A + static_cast<size_t>(p_.repeats[r].first) * es;
      const void* br = B + static_cast<size_t>(p_.repeats[r].second) * es;
      void* yr = Y + static_cast<size_t>(p_.y_step) * r * es;
      if (g.use_lt) {
        TERN_RETURN_IF_ERROR(
            run_lt(g, ar, br, g.epi == Epi::kNone ? nullptr : bias, yr, a.workspace));
      } else {
        TERN_RETURN_IF_ERROR(run_cublas(g, ar, br, yr, a.workspace));
      }
    }
    if (g.post.n == 0 && !g.post_bias) return Status::ok();
    // (check_epilogue refused other types at prepare time.)
    const int64_t n = a.outputs[0]->numel();
    return launched(bias_act(static_cast<float*>(a.outputs[0]->raw()),
                             g.post_bias ? static_cast<const float*>(bias) : nullptr, nullptr, n,
                             g.N, 1, g.post, stream()),
                    "bias_act");
  }

 private:
  GemmKernelParams p_;
};

// The epilogue kernel (bias_act) takes float32: a half-precision GEMM whose bias or activation
// could not go into a cuBLASLt epilogue is refused now, at planning, so it runs elsewhere.
Status check_epilogue(const OpContext& ctx, const GemmKernelParams& p) {
  if ((p.g.post.n > 0 || p.g.post_bias) && p.g.dtype != DType::kFloat32) {
    return unsupported(ctx.where, ": a ", dtype_name(p.g.dtype),
                       " GEMM epilogue that cuBLASLt cannot fuse");
  }
  return Status::ok();
}

// MatMul's batch: one strided call when the offsets are regular, A folded into M rows when B is
// shared, else one call per matrix.
void plan_batches(const ops::MatMulParams& mm, GemmKernelParams& p) {
  GemmDesc& g = p.g;
  g.M = mm.M;
  g.N = mm.N;
  g.K = mm.K;
  g.lda = mm.K;
  g.ldb = mm.N;
  g.ldy = mm.N;
  const size_t nb = mm.a_offsets.size();
  if (nb <= 1) return;
  const bool b_shared = std::all_of(mm.b_offsets.begin(), mm.b_offsets.end(),
                                    [&](int64_t o) { return o == mm.b_offsets[0]; });
  bool a_packed = true;
  for (size_t i = 0; i < nb; ++i)
    a_packed =
        a_packed && mm.a_offsets[i] == mm.a_offsets[0] + static_cast<int64_t>(i) * mm.M * mm.K;
  if (b_shared && a_packed) {
    g.M = mm.M * static_cast<int64_t>(nb);
    p.repeats = {{mm.a_offsets[0], mm.b_offsets[0]}};
    return;
  }
  const int64_t sa = mm.a_offsets[1] - mm.a_offsets[0], sb = mm.b_offsets[1] - mm.b_offsets[0];
  bool regular = sa >= 0 && sb >= 0;
  for (size_t i = 0; i < nb && regular; ++i) {
    regular = mm.a_offsets[i] == mm.a_offsets[0] + static_cast<int64_t>(i) * sa &&
              mm.b_offsets[i] == mm.b_offsets[0] + static_cast<int64_t>(i) * sb;
  }
  if (regular) {
    g.batch = static_cast<int64_t>(nb);
    g.sa = sa;
    g.sb = sb;
    g.sy = mm.M * mm.N;
    p.repeats = {{mm.a_offsets[0], mm.b_offsets[0]}};
    return;
  }
  p.repeats.clear();
  for (size_t i = 0; i < nb; ++i) p.repeats.push_back({mm.a_offsets[i], mm.b_offsets[i]});
  p.y_step = mm.M * mm.N;
}

// The offsets' bound on the operands' alignment (GemmDesc::step_*).
void note_offsets(GemmKernelParams& p) {
  for (const auto& [a, b] : p.repeats) {
    p.g.step_a = std::gcd(p.g.step_a, a);
    p.g.step_b = std::gcd(p.g.step_b, b);
  }
  p.g.step_y = p.repeats.size() > 1 ? p.y_step : 0;
}

Expected<std::unique_ptr<Kernel>> make_matmul(const OpContext& ctx) {
  GemmKernelParams p;
  p.g.dtype = ctx.inputs[0].dtype;
  if (ctx.node->op_type == "FusedMatMul") {
    TERN_ASSIGN_OR_RETURN(ops::FusedMatMulParams f, ops::parse_fused_matmul(ctx));
    plan_batches(f.mm, p);
    if (f.has_bias) p.bias_input = 2;
    if (f.act == ops::MatMulAct::kGelu) {
      p.g.post.n = 1;
      p.g.post.steps[0] = ActStep{Act::kGeluErf, 0, 0};
      p.g.post_bias = f.has_bias;  // bias then exact GELU in one pass
    } else if (f.act == ops::MatMulAct::kRelu) {
      p.g.epi = f.has_bias ? Epi::kReluBias : Epi::kRelu;
    } else if (f.has_bias) {
      p.g.epi = Epi::kBias;
    }
  } else {
    TERN_ASSIGN_OR_RETURN(ops::MatMulParams mm, ops::parse_matmul(ctx));
    plan_batches(mm, p);
  }
  note_offsets(p);
  const bool fusable = p.g.epi != Epi::kNone && p.repeats.size() == 1;
  TERN_RETURN_IF_ERROR(apply_flags(ctx, fusable, p.g));
  TERN_RETURN_IF_ERROR(check_epilogue(ctx, p));
  return std::unique_ptr<Kernel>(std::make_unique<GemmKernel>(std::move(p)));
}

Expected<std::unique_ptr<Kernel>> make_gemm(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::GemmParams gp, ops::parse_gemm(ctx));
  GemmKernelParams p;
  GemmDesc& g = p.g;
  g.dtype = ctx.inputs[0].dtype;
  if (ctx.inputs[1].dtype != g.dtype) return unsupported(ctx.where, ": mixed types");
  g.M = gp.M;
  g.N = gp.N;
  g.K = gp.K;
  g.ta = gp.trans_a;
  g.tb = gp.trans_b;
  g.lda = gp.trans_a ? gp.M : gp.K;
  g.ldb = gp.trans_b ? gp.K : gp.N;
  g.ldy = gp.N;
  g.alpha = gp.alpha;
  const Shape& c = gp.c_shape;
  const bool has_c = ctx.has_input(2) && gp.beta != 0.0f && !c.empty() && numel(c) > 0;
  if (has_c) {
    if (ctx.inputs[2].dtype != g.dtype) return unsupported(ctx.where, ": C of another type");
    const bool vector = numel(c) == gp.N && c.back() == gp.N && gp.beta == 1.0f;
    if (vector) {
      g.epi = Epi::kBias;
      p.bias_input = 2;
    } else {
      // beta * C: C broadcast into Y first, then the product accumulates onto it.
      Shape cs = c;
      while (cs.size() < 2) cs.insert(cs.begin(), 1);
      const Shape st = contiguous_strides(cs);
      Shape strides = {cs[0] == 1 ? 0 : st[0], cs[1] == 1 ? 0 : st[1]};
      TERN_ASSIGN_OR_RETURN(p.c_copy, make_strided({gp.M, gp.N}, strides, 0));
      p.c_input = 2;
      g.beta = gp.beta;
    }
  }
  TERN_RETURN_IF_ERROR(apply_flags(ctx, g.epi != Epi::kNone, g));
  if (g.post_bias && g.post.n == 0 && g.dtype != DType::kFloat32) {
    // cuBLAS has no epilogue and the epilogue kernel takes float32: the bias row is broadcast
    // into Y first and the product accumulates onto it (beta = 1), decided here, not at run time.
    TERN_ASSIGN_OR_RETURN(p.c_copy, make_strided({gp.M, gp.N}, {0, 1}, 0));
    p.c_input = p.bias_input;
    g.beta = 1.0f;
    g.post_bias = false;
  }
  TERN_RETURN_IF_ERROR(check_epilogue(ctx, p));
  return std::unique_ptr<Kernel>(std::make_unique<GemmKernel>(std::move(p)));
}

}  // namespace

}  // namespace tern::cuda

namespace tern {

void register_cuda_gemm(KernelRegistry& r) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    r.add("MatMul", "cuda", t, cuda::make_matmul);
    r.add("Gemm", "cuda", t, cuda::make_gemm);
  }
  r.add("FusedMatMul", "cuda", DType::kFloat32, cuda::make_matmul);
}

}  // namespace tern
