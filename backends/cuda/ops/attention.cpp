// Attention on CUDA, chosen per plan by the sdp flags (and run options): FLASH, then
// MEM_EFFICIENT, then MATH (scale * Q Kᵀ by batched cuBLAS GEMMs into the workspace, the masked
// softmax kernel, then P V). cuDNN's fused attention is not used. KV caches, nonpad_kv_seqlen and
// qk_matmul_output run on the CPU.
#include <algorithm>
#include <iterator>

#include "backends/cuda/cuda_sdp.h"
#include "backends/cuda/ops/cuda_ops.h"
#include "core/kernel_registry.h"

namespace tern {

std::string cuda_sdp_refusal(int backend, const ops::SdpCase& c) {
  if (backend == 3) return "cuDNN fused attention is not used by Tern's CUDA backend";
  if (c.dropout > 0) return "dropout_p > 0 (inference kernels do not apply dropout)";
  if (c.batch < 0 || c.heads < 0 || c.seq_q < 0 || c.seq_kv < 0 || c.head_dim < 0) {
    return "negative sizes";
  }
  const bool half = c.dtype == DType::kFloat16;
  if (c.dtype != DType::kFloat32 && !(half && backend != 0)) {
    return str_cat("dtype ", dtype_name(c.dtype),
                   backend == 0 ? " (MATH takes float32)" : " (float32 and float16 only)");
  }
  if (backend == 1 && c.head_dim > 128) return str_cat("head_dim ", c.head_dim, " > 128");
  if (backend == 2 && c.head_dim > 256) return str_cat("head_dim ", c.head_dim, " > 256");
  if (backend == 1 && c.batch * c.heads > 65535) return "more than 65535 (batch x heads)";
  if (backend == 0) {
    const double bytes = 4.0 * static_cast<double>(c.batch) * static_cast<double>(c.heads) *
                         static_cast<double>(c.seq_q) * static_cast<double>(c.seq_kv);
    if (bytes > static_cast<double>(int64_t{1} << 36)) {
      return str_cat("the score matrix would take ", bytes, " bytes");
    }
  }
  return "";
}

namespace cuda {

namespace {

enum class Sdp { kMath, kFlash, kMemEfficient };

struct AttnParams {
  ops::AttentionParams p;
  AttnDesc d;
  Sdp kind;
  bool tf32 = false;
};

// MATH's score matrix in its workspace, rounded to 256 bytes.
size_t scores_bytes(const AttnDesc& d) {
  const size_t b = static_cast<size_t>(d.batch * d.q_heads * d.seq_q * d.seq_kv) * sizeof(float);
  return (b + 255) / 256 * 256;
}

Status run_math(const AttnParams& k, const KernelArgs& a) {
  const AttnDesc& d = k.d;
  // The workspace: the score matrix, then the cuBLAS workspace (scores_bytes() rounds up).
  auto* s = static_cast<float*>(a.workspace);
  TERN_ASSIGN_OR_RETURN(cublasHandle_t h,
                        cublas_handle(static_cast<uint8_t*>(a.workspace) + scores_bytes(d)));
  TERN_CUDA_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  const cublasComputeType_t ct = k.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float* q = a.inputs[0]->data<float>();
  const float* kk = a.inputs[1]->data<float>();
  const float* v = a.inputs[2]->data<float>();
  const void* mask = a.inputs.size() > 3 && a.inputs[3] ? a.inputs[3]->raw() : nullptr;
  float* y = a.outputs[0]->data<float>();
  const int64_t group = d.q_heads / d.kv_heads;
  const int64_t plane = d.seq_q * d.seq_kv;
  const float one = 1.f, zero = 0.f;
  // Per (batch, kv head): the group of query heads that share it, as one strided batch.
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t hk = 0; hk < d.kv_heads; ++hk) {
      const int64_t h0 = hk * group;
      const float* qb = q + b * d.q_sb + h0 * d.q_sh;
      const float* kb = kk + b * d.k_sb + hk * d.k_sh;
      float* sb = s + (b * d.q_heads + h0) * plane;
      // Column-major: Sᵀ (Skv x Sq) = K (Skv x D as Kᵀ's transpose) * Qᵀ (D x Sq), scaled.
      TERN_CUDA_CHECK(cublasGemmStridedBatchedEx(
          h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(d.seq_kv), static_cast<int>(d.seq_q),
          static_cast<int>(d.d), &d.scale, kb, CUDA_R_32F, static_cast<int>(d.k_ss), 0, qb,
          CUDA_R_32F, static_cast<int>(d.q_ss), d.q_sh, &zero, sb, CUDA_R_32F,
          static_cast<int>(d.seq_kv), plane, static_cast<int>(group), ct, CUBLAS_GEMM_DEFAULT));
    }
  }
  AttnDesc unscaled = d;
  TERN_RETURN_IF_ERROR(
      launched(attention_scores_softmax(unscaled, s, mask, stream()), "attention_scores_softmax"));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t hk = 0; hk < d.kv_heads; ++hk) {
      const int64_t h0 = hk * group;
      const float* vb = v + b * d.v_sb + hk * d.v_sh;
      const float* pb = s + (b * d.q_heads + h0) * plane;
      float* yb = y + b * d.y_sb + h0 * d.y_sh;
      // Yᵀ (Dv x Sq) = Vᵀ (Dv x Skv) * Pᵀ (Skv x Sq).
      TERN_CUDA_CHECK(cublasGemmStridedBatchedEx(
          h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(d.dv), static_cast<int>(d.seq_q),
          static_cast<int>(d.seq_kv), &one, vb, CUDA_R_32F, static_cast<int>(d.v_ss), 0, pb,
          CUDA_R_32F, static_cast<int>(d.seq_kv), plane, &zero, yb, CUDA_R_32F,
          static_cast<int>(d.y_ss), d.y_sh, static_cast<int>(group), ct, CUBLAS_GEMM_DEFAULT));
    }
  }
  return Status::ok();
}

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(AttnParams p) : p_(std::move(p)) {}
  const char* name() const override {
    return p_.kind == Sdp::kFlash          ? "cuda_flash"
           : p_.kind == Sdp::kMemEfficient ? "cuda_mem_efficient"
                                           : "cuda_math";
  }
  size_t workspace_bytes() const override {
    if (p_.kind != Sdp::kMath) return 0;
    return scores_bytes(p_.d) + kCublasWorkspace;
  }
  Status run(const KernelArgs& a, const ExecContext&) const override {
    if (p_.kind == Sdp::kMath) return run_math(p_, a);
    const void* mask = a.inputs.size() > 3 && a.inputs[3] ? a.inputs[3]->raw() : nullptr;
    const void* q = a.inputs[0]->raw();
    const void* k = a.inputs[1]->raw();
    const void* v = a.inputs[2]->raw();
    void* y = a.outputs[0]->raw();
    if (p_.kind == Sdp::kFlash) {
      return launched(attention_flash(p_.d, q, k, v, mask, y, stream()), "attention_flash");
    }
    return launched(attention_mem_efficient(p_.d, q, k, v, mask, y, stream()),
                    "attention_mem_efficient");
  }

 private:
  AttnParams p_;
};

Expected<std::unique_ptr<Kernel>> make_attention(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::AttentionParams p, ops::parse_attention(ctx));
  if (p.nonpad || p.want_qk || p.has_past || p.want_present_key || p.want_present_value) {
    return unsupported(ctx.where,
                       ": KV caches, nonpad_kv_seqlen and qk_matmul_output run on "
                       "the CPU");
  }
  const DType t = ctx.inputs[0].dtype;
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.inputs[i].dtype != t) return unsupported(ctx.where, ": mixed q/k/v types");
  }
  if (p.mask == ops::AttentionParams::Mask::kFloat && ctx.inputs[3].dtype != DType::kFloat32) {
    return unsupported(ctx.where, ": CUDA attention masks are float32 or bool");
  }
  ops::SdpCase c = ops::sdp_case(p);
  c.dtype = t;
  AttnParams k;
  k.p = p;
  AttnDesc& d = k.d;
  d.batch = p.batch;
  d.q_heads = p.q_heads;
  d.kv_heads = p.kv_heads;
  d.seq_q = p.seq_q;
  d.seq_kv = p.seq_kv;
  d.d = p.head_dim;
  d.dv = p.v_head_dim;
  d.q_sb = p.q.stride_b, d.q_sh = p.q.stride_h, d.q_ss = p.q.stride_s;
  d.k_sb = p.k.stride_b, d.k_sh = p.k.stride_h, d.k_ss = p.k.stride_s;
  d.v_sb = p.v.stride_b, d.v_sh = p.v.stride_h, d.v_ss = p.v.stride_s;
  d.y_sb = p.y.stride_b, d.y_sh = p.y.stride_h, d.y_ss = p.y.stride_s;
  d.scale = p.scale;
  d.softcap = p.softcap;
  d.causal = p.causal;
  d.causal_offset = p.causal_offset;
  d.mask = p.mask == ops::AttentionParams::Mask::kNone   ? 0
           : p.mask == ops::AttentionParams::Mask::kBool ? 1
                                                         : 2;
  d.m_sb = p.mask_stride[0], d.m_sh = p.mask_stride[1];
  d.m_si = p.mask_stride[2], d.m_sj = p.mask_stride[3];
  d.mask_len = p.mask_len;
  TERN_ASSIGN_OR_RETURN(d.t, elem_for(ctx, t, "attention"));
  k.tf32 = ctx.flag(FlagId::kCudaAllowTf32) != 0;
  struct Choice {
    Sdp kind;
    int backend;
    FlagId flag;
    const char* name;
  };
  const Choice order[] = {{Sdp::kFlash, 1, FlagId::kSdpFlash, "FLASH"},
                          {Sdp::kMemEfficient, 2, FlagId::kSdpMemEfficient, "MEM_EFFICIENT"},
                          {Sdp::kMath, 0, FlagId::kSdpMath, "MATH"}};
  // Every sdp backend off: no backend of any session may run it (the CPU's FLASH and MATH are
  // among these), and the error is the CPU's.
  if (std::none_of(std::begin(order), std::end(order),
                   [&](const Choice& ch) { return ctx.flag(ch.flag) != 0; })) {
    return invalid_argument(ctx.where,
                            ": no enabled scaled-dot-product attention backend can run it: "
                            "FLASH, MEM_EFFICIENT and MATH are disabled");
  }
  std::string why;
  for (const Choice& ch : order) {
    std::string r = ctx.flag(ch.flag) ? cuda_sdp_refusal(ch.backend, c)
                                      : str_cat("disabled (", Flags::def(ch.flag).name, ")");
    // FLASH also needs every head dim (and the value dim) within its tile.
    if (r.empty() && ch.kind == Sdp::kFlash && d.dv > 128) r = "v head_dim > 128";
    if (r.empty() && ch.kind == Sdp::kMemEfficient && d.dv > 256) r = "v head_dim > 256";
    if (r.empty()) {
      k.kind = ch.kind;
      return std::unique_ptr<Kernel>(std::make_unique<AttentionKernel>(std::move(k)));
    }
    why += str_cat(why.empty() ? "" : "; ", ch.name, ": ", r);
  }
  return unsupported(ctx.where,
                     ": no enabled scaled-dot-product attention backend can run it "
                     "on CUDA: ",
                     why);
}

}  // namespace

}  // namespace cuda

void register_cuda_attention(KernelRegistry& r) {
  r.add("Attention", "cuda", DType::kUndefined, cuda::make_attention);
}

}  // namespace tern
