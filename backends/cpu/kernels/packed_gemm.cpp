// Matrix products by constant weights: MatMul, FusedMatMul and Gemm whose B is a model constant
// [K, N] (transformer projections, classifier heads), on Tern's panel GEMM (panel_gemm.h).
//
// B is packed once per session into 16-column panels. The layout does not depend on the rows of
// A, so every plan of a session shares one packed copy (through the session's WeightCache)
// whatever its sequence length or batch, and preparing the kernel for a new shape costs nothing.
// Bias, Gemm's alpha and beta*C (a constant row) and Relu are applied in the tile's registers,
// GELU (exact, erf) right after each tile. Work items are (48 rows x one tile of panels); each
// output element is summed by one thread in one order, so results do not depend on the thread
// count: the kernel serves deterministic_algorithms too.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "backends/cpu/blas_verbose.h"
#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/panel_gemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "ops/fused_matmul.h"

namespace tern {
namespace {

constexpr int64_t kRowBlock = 48;  // rows per work item: a multiple of panel::kTileRows
const char* const kPackedKey = "tern gemm p16 v1";

enum class Act { kNone, kRelu, kGelu };

Expected<PackedData> pack_b(const float* b, int64_t k, int64_t n, bool trans_b,
                            const std::string& key) {
  return packed_blob(static_cast<size_t>(panel::packed_floats(k, n)), key, [&](float* out) {
    panel::pack(b, k, n, trans_b ? 1 : n, trans_b ? k : 1, out);
  });
}

// ---- The kernel ---------------------------------------------------------------------------------

struct GemmPlan {
  int64_t rows = 0, n = 0, k = 0;
  float alpha = 1.0f;
  Act act = Act::kNone;
  std::vector<float> bias;  // N values (Gemm's beta * C row), or empty
  int bias_input = -1;      // FusedMatMul: the bias input read at run time
};

class PackedGemm final : public Kernel {
 public:
  const char* name() const override { return name_; }
  std::vector<PackedWeight> packed_weights() const override { return {PackedWeight{1, packed_}}; }
  size_t packed_bytes() const override { return own_copy_ ? packed_.data.byte_size() : 0; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx);

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    const GemmPlan& g = plan_;
    if (g.rows == 0 || g.n == 0) return Status::ok();
    const float* A = a.inputs[0]->data<float>();
    float* C = a.outputs[0]->data<float>();
    const float* bias = !g.bias.empty() ? g.bias.data()
                        : g.bias_input >= 0
                            ? a.inputs[static_cast<size_t>(g.bias_input)]->data<float>()
                            : nullptr;
    const int64_t panels = (g.n + panel::kPanel - 1) / panel::kPanel;
    const int64_t group = panel::panels_per_tile(isa_);
    const int64_t groups = (panels + group - 1) / group;
    const int64_t blocks = (g.rows + kRowBlock - 1) / kRowBlock;
    const int64_t tasks = blocks * groups;
    const panel::Epilogue e{bias, g.alpha, g.act == Act::kRelu};
    // Consecutive work items share A's rows (B streams once per row block) or B's panels (A
    // streams once per panel group), whichever moves fewer bytes through the caches.
    const bool rows_outer = blocks * g.k * g.n <= groups * g.rows * g.k;
    BlasVerbose verbose(exec, op_.c_str(), label_, GemmShape{false, false, g.rows, g.n, g.k});
    parallel_for(tasks, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t blk = rows_outer ? task / groups : task % blocks;
        const int64_t grp = rows_outer ? task % groups : task / blocks;
        const int64_t p0 = grp * group, p1 = std::min(panels, p0 + group);
        const int64_t r0 = blk * kRowBlock, r1 = std::min(g.rows, r0 + kRowBlock);
        panel::multiply(isa_, A, g.k, w_, g.k, g.n, C, g.n, e, r0, r1, p0, p1);
        if (g.act == Act::kGelu) {
          const int64_t c0 = p0 * panel::kPanel, c1 = std::min(g.n, p1 * panel::kPanel);
          for (int64_t r = r0; r < r1; ++r) gelu(C + r * g.n + c0, c1 - c0);
        }
      }
    });
    return Status::ok();
  }

 private:
  // GELU, exact (erf) form, on `n` values just written.
  void gelu(float* y, int64_t n) const {
    constexpr int64_t kChunk = 64;
    float tmp[kChunk];
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t m = std::min(kChunk, n - j0);
      for (int64_t j = 0; j < m; ++j) tmp[j] = y[j0 + j] * 0.70710678118654752f;
      vec_->erf(tmp, tmp, m);
      for (int64_t j = 0; j < m; ++j) y[j0 + j] = 0.5f * y[j0 + j] * (1.0f + tmp[j]);
    }
  }

  GemmPlan plan_;
  PackedData packed_;
  const float* w_ = nullptr;
  bool own_copy_ = false;  // packed by this kernel, not shared through the session
  CpuIsa isa_ = CpuIsa::kScalar;
  const VecOps* vec_ = nullptr;
  const char* name_ = "packed_gemm";
  const char* label_ = "tern:packed_gemm";  // for blas.verbose
  std::string op_;                          // MatMul, FusedMatMul or Gemm
};

Expected<std::unique_ptr<Kernel>> PackedGemm::create(const OpContext& ctx) {
  const TensorInfo& a = ctx.inputs[0];
  const TensorInfo& b = ctx.inputs[1];
  if (!b.value || b.shape.size() != 2 || b.dtype != DType::kFloat32 || a.dtype != DType::kFloat32) {
    return unsupported("packed_gemm takes float32 A x a constant 2-D float32 B");
  }
  if (ctx.flag(FlagId::kCpuMatmulAllowBf16) && onednn_native_bf16()) {
    return unsupported("packed_gemm: cpu.matmul.allow_bf16 is on, oneDNN's bf16 kernel runs it");
  }
  auto k = std::make_unique<PackedGemm>();
  GemmPlan& g = k->plan_;
  bool trans_b = false;
  const std::string& op = ctx.node->op_type;
  if (op == "Gemm") {
    TERN_ASSIGN_OR_RETURN(ops::GemmParams p, ops::parse_gemm(ctx));
    if (p.trans_a) return unsupported("packed_gemm: Gemm with transA");
    g.rows = p.M;
    g.n = p.N;
    g.k = p.K;
    g.alpha = p.alpha;
    trans_b = p.trans_b;
    if (!p.c_shape.empty() && p.beta != 0.0f) {
      const Tensor* c = ctx.inputs[2].value;
      const bool row = numel(p.c_shape) == p.N || numel(p.c_shape) == 1;
      if (!c || !row || (p.c_shape.size() == 2 && p.c_shape[0] != 1)) {
        return unsupported("packed_gemm: Gemm's C is not a constant row");
      }
      g.bias.resize(static_cast<size_t>(p.N));
      for (int64_t j = 0; j < p.N; ++j) {
        g.bias[static_cast<size_t>(j)] =
            p.beta * static_cast<float>(c->float_at(c->numel() == 1 ? 0 : j));
      }
    }
  } else {
    ops::FusedMatMulParams fp;
    if (op == "FusedMatMul") {
      TERN_ASSIGN_OR_RETURN(fp, ops::parse_fused_matmul(ctx));
    } else {
      TERN_ASSIGN_OR_RETURN(fp.mm, ops::parse_matmul(ctx));
    }
    const ops::MatMulParams& p = fp.mm;
    // A's matrices one after another: its leading dims fold into the rows.
    for (size_t i = 0; i < p.a_offsets.size(); ++i) {
      if (p.a_offsets[i] != static_cast<int64_t>(i) * p.M * p.K) {
        return unsupported("packed_gemm: A's batch is broadcast");
      }
    }
    g.rows = static_cast<int64_t>(p.a_offsets.size()) * p.M;
    g.n = p.N;
    g.k = p.K;
    if (fp.has_bias) g.bias_input = 2;
    g.act = fp.act == ops::MatMulAct::kRelu   ? Act::kRelu
            : fp.act == ops::MatMulAct::kGelu ? Act::kGelu
                                              : Act::kNone;
  }
  k->isa_ = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
  k->vec_ = &vec_ops(k->isa_);
  k->name_ = k->isa_ == CpuIsa::kAvx512 ? "packed_gemm.avx512"
             : k->isa_ == CpuIsa::kAvx2 ? "packed_gemm.avx2"
                                        : "packed_gemm";
  k->label_ = k->isa_ == CpuIsa::kAvx512 ? "tern:packed_gemm.avx512"
              : k->isa_ == CpuIsa::kAvx2 ? "tern:packed_gemm.avx2"
                                         : "tern:packed_gemm";
  k->op_ = op;
  // The packed weights (core/weight_memory.h's packed_copy: the model's, the session's or own).
  const size_t bytes = static_cast<size_t>(panel::packed_floats(g.k, g.n)) * sizeof(float);
  const std::string key = str_cat(kPackedKey, trans_b ? " t" : "");
  const Tensor& w = *b.value;
  auto pack = [&]() { return pack_b(w.data<float>(), g.k, g.n, trans_b, key); };
  TERN_ASSIGN_OR_RETURN(PackedCopy copy, packed_copy(b, key, bytes, ctx.weights, pack));
  k->packed_ = std::move(copy.data);
  k->own_copy_ = copy.own;
  k->w_ = static_cast<const float*>(k->packed_.data.raw());
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

TERN_REGISTRATION void register_cpu_packed_gemm(KernelRegistry& r) {
  // Ahead of oneDNN's matmul (priority 1) and the OpenBLAS kernels (0): whatever this declines
  // (a non-constant B, Gemm's transA or a full C) goes to them.
  r.add("MatMul", "cpu", DType::kFloat32, PackedGemm::create, 5);
  r.add("FusedMatMul", "cpu", DType::kFloat32, PackedGemm::create, 5);
  r.add("Gemm", "cpu", DType::kFloat32, PackedGemm::create, 5);
}

}  // namespace tern
