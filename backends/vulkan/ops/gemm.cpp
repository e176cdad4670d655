// MatMul, Gemm and FusedMatMul on Vulkan: the tiled shared-memory GEMM shader (float32; float16
// storage, and float16 arithmetic under vulkan.allow_fp16_reduced_precision), with the bias, C
// term and activation in its epilogue. Batched MatMul is one dispatch when the matrices are
// evenly spaced (broadcast ones at stride 0), else one dispatch per matrix.
#include "backends/vulkan/ops/vulkan_ops.h"
#include "core/kernel_registry.h"
#include "ops/fused_matmul.h"
#include "ops/matmul.h"

namespace tern::vk {

namespace {

struct GemmParams {
  const Pipeline* pipe = nullptr;
  GemmPush push{};
  uint32_t batch = 1;
  // Per-matrix (A, B) element offsets when the batch is irregular (one dispatch each).
  std::vector<std::pair<int64_t, int64_t>> repeats;
  int c_input = -1;
};

Status run_gemm_kernel(const GemmParams& q, const KernelArgs& a, const ExecContext&) {
  const Tensor* A = a.inputs[0];
  const Tensor* B = a.inputs[1];
  const Tensor* C = q.c_input >= 0 ? a.inputs[static_cast<size_t>(q.c_input)] : nullptr;
  Tensor* Y = a.outputs[0];
  GemmPush g = q.push;
  g.oa = off(A);
  g.ob = off(B);
  g.oc = C ? off(C) : 0;
  g.oy = off(Y);
  const void* c = C ? C->raw() : nullptr;
  if (q.repeats.empty())
    return run_gemm(q.pipe, A->raw(), B->raw(), c, nullptr, Y->raw(), g, q.batch);
  const uint32_t oa = g.oa, ob = g.ob, oy = g.oy;
  for (size_t r = 0; r < q.repeats.size(); ++r) {
    g.oa = oa + u32(q.repeats[r].first);
    g.ob = ob + u32(q.repeats[r].second);
    g.oy = oy + u32(static_cast<int64_t>(r) * g.M * g.N);
    TERN_RETURN_IF_ERROR(run_gemm(q.pipe, A->raw(), B->raw(), c, nullptr, Y->raw(), g, 1));
  }
  return Status::ok();
}

Status prepare_common(const OpContext& ctx, GemmParams& p) {
  const DType t = ctx.inputs[0].dtype;
  if (ctx.inputs[1].dtype != t) return unsupported(ctx.where, ": mixed input types");
  TERN_ASSIGN_OR_RETURN(std::string suffix, float_suffix(ctx, t, true));
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("gemm_" + suffix));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(ctx.inputs[0].shape)));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(ctx.inputs[1].shape)));
  return check_gemm_size(ctx, p.push.M, p.push.N, p.batch);
}

Expected<std::unique_ptr<Kernel>> make_matmul(const OpContext& ctx) {
  GemmParams p;
  GemmPush& g = p.push;
  ops::MatMulParams mm;
  g.alpha = 1;
  g.beta = 1;
  if (ctx.node->op_type == "FusedMatMul") {
    TERN_ASSIGN_OR_RETURN(ops::FusedMatMulParams f, ops::parse_fused_matmul(ctx));
    mm = f.mm;
    if (f.has_bias) {
      p.c_input = 2;
      g.flags |= 1;
      g.scn = 1;  // one value per column
    }
    Chain c;
    if (f.act == ops::MatMulAct::kRelu) TERN_RETURN_IF_ERROR(chain_add(ctx, &c, kRelu));
    if (f.act == ops::MatMulAct::kGelu) TERN_RETURN_IF_ERROR(chain_add(ctx, &c, kGelu));
    g.acts = c.acts;
  } else {
    TERN_ASSIGN_OR_RETURN(mm, ops::parse_matmul(ctx));
  }
  g.M = u32(mm.M);
  g.N = u32(mm.N);
  g.K = u32(mm.K);
  g.sam = u32(mm.K);
  g.sak = 1;
  g.sbk = u32(mm.N);
  g.sbn = 1;
  g.syb = u32(mm.M * mm.N);
  const size_t nb = std::max<size_t>(mm.a_offsets.size(), 1);
  if (nb > 1) {
    const int64_t sa = mm.a_offsets[1] - mm.a_offsets[0], sb = mm.b_offsets[1] - mm.b_offsets[0];
    bool regular = sa >= 0 && sb >= 0 && mm.a_offsets[0] == 0 && mm.b_offsets[0] == 0;
    for (size_t i = 0; i < nb && regular; ++i) {
      regular = mm.a_offsets[i] == static_cast<int64_t>(i) * sa &&
                mm.b_offsets[i] == static_cast<int64_t>(i) * sb;
    }
    if (regular) {
      p.batch = u32(static_cast<int64_t>(nb));
      g.sab = u32(sa);
      g.sbb = u32(sb);
    } else {
      for (size_t i = 0; i < nb; ++i) p.repeats.push_back({mm.a_offsets[i], mm.b_offsets[i]});
    }
  }
  TERN_RETURN_IF_ERROR(prepare_common(ctx, p));
  return make_kernel("vulkan_gemm", p, run_gemm_kernel);
}

Expected<std::unique_ptr<Kernel>> make_gemm(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::GemmParams gp, ops::parse_gemm(ctx));
  GemmParams p;
  GemmPush& g = p.push;
  g.M = u32(gp.M);
  g.N = u32(gp.N);
  g.K = u32(gp.K);
  g.sam = gp.trans_a ? 1 : u32(gp.K);
  g.sak = gp.trans_a ? u32(gp.M) : 1;
  g.sbk = gp.trans_b ? 1 : u32(gp.N);
  g.sbn = gp.trans_b ? u32(gp.K) : 1;
  g.alpha = gp.alpha;
  g.beta = gp.beta;
  if (ctx.has_input(2)) {
    const Shape& c = gp.c_shape;
    p.c_input = 2;
    g.flags |= 1;
    // C broadcasts to [M, N] numpy-style from the right.
    const int64_t cn = c.empty() ? 1 : c.back();
    const int64_t cm = c.size() >= 2 ? c[c.size() - 2] : 1;
    g.scn = cn == 1 ? 0 : 1;
    g.scm = cm == 1 ? 0 : u32(cn);
  }
  TERN_RETURN_IF_ERROR(prepare_common(ctx, p));
  return make_kernel("vulkan_gemm", p, run_gemm_kernel);
}

}  // namespace

}  // namespace tern::vk

namespace tern {

void register_vulkan_gemm(KernelRegistry& r) {
  r.add("MatMul", "vulkan", DType::kUndefined, vk::make_matmul);
  r.add("Gemm", "vulkan", DType::kUndefined, vk::make_gemm);
  r.add("FusedMatMul", "vulkan", DType::kUndefined, vk::make_matmul);
}

}  // namespace tern
