// Convolutions and pooling on Vulkan (float32, 1-D and 2-D): Conv and FusedConv as im2col + the
// tiled GEMM (a plain GEMM for 1x1 stride-1 kernels) or a direct kernel (grouped and depthwise
// convolutions, vulkan.conv_algorithm=direct, or columns that would pass 32 MiB), with bias,
// residual and activations in the epilogue; ConvTranspose; MaxPool and AveragePool.
#include "backends/vulkan/ops/vulkan_ops.h"
#include "core/kernel_registry.h"
#include "ops/common/device_ops.h"
#include "ops/conv_transpose.h"
#include "ops/fused_conv.h"

namespace tern::vk {

namespace {

constexpr int64_t kMaxColumnBytes = 32ll << 20;

// The window as 2-D (H, W), or UNSUPPORTED for three spatial dims.
Expected<ops::Window> window_2d(const OpContext& ctx, const ops::Window& w) {
  const ops::Window v = ops::as_3d(w);
  if (v.in[0] != 1 || v.out[0] != 1 || v.kernel[0] != 1) {
    return unsupported(ctx.where, ": Vulkan runs 1-D and 2-D windows only");
  }
  return v;
}

struct DirectPush {
  uint32_t N, C, H, W, M, OH, OW, Cg;
  uint32_t KH, KW, SH, SW, DH, DW, PH, PW;
  uint32_t Mg, ox, ow, ob, oz, oy, flags, acts;
  float ap[6];
};

struct Im2colPush {
  uint32_t N, C, H, W, OH, OW, KH, KW;
  uint32_t SH, SW, DH, DW, PH, PW, ox, oc;
};

struct ConvParams {
  const Pipeline* direct = nullptr;
  const Pipeline* im2col = nullptr;  // with gemm: the GEMM path
  const Pipeline* gemm = nullptr;
  DirectPush dp{};
  Im2colPush ip{};
  GemmPush gp{};
  uint32_t images = 0;
  bool has_bias = false, has_sum = false;
  size_t workspace = 0;
};

class ConvKernel final : public Kernel {
 public:
  explicit ConvKernel(ConvParams p) : p_(p) {}
  const char* name() const override {
    return p_.gemm ? (p_.im2col ? "vulkan_im2col_gemm" : "vulkan_gemm_1x1") : "vulkan_direct";
  }
  size_t workspace_bytes() const override { return p_.workspace; }
  Status run(const KernelArgs& a, const ExecContext&) const override {
    const Tensor* x = a.inputs[0];
    const Tensor* w = a.inputs[1];
    const Tensor* b = p_.has_bias ? a.inputs[2] : nullptr;
    const Tensor* z = p_.has_sum ? a.inputs[3] : nullptr;
    Tensor* y = a.outputs[0];
    if (!p_.gemm) {
      DirectPush push = p_.dp;
      push.ox = off(x);
      push.ow = off(w);
      push.ob = b ? off(b) : 0;
      push.oz = z ? off(z) : 0;
      push.oy = off(y);
      const uint64_t n = uint64_t{push.N} * ((push.M + 3) / 4) * push.OH * push.OW;
      return run_1d(
          p_.direct,
          {x->raw(), w->raw(), b ? b->raw() : y->raw(), z ? z->raw() : y->raw(), y->raw()}, push, n,
          64);
    }
    GemmPush g = p_.gp;
    const void* cols = x->raw();
    g.ob = off(x);
    if (p_.im2col) {
      Im2colPush ip = p_.ip;
      ip.ox = off(x);
      ip.oc = offset_of(a.workspace, 4);
      TERN_RETURN_IF_ERROR(run_1d(p_.im2col, {x->raw(), a.workspace}, ip,
                                  uint64_t{ip.N} * ip.C * ip.KH * ip.KW * ip.OH * ip.OW));
      cols = a.workspace;
      g.ob = ip.oc;
    }
    g.oa = off(w);
    g.oc = b ? off(b) : 0;
    g.oz = z ? off(z) : 0;
    g.oy = off(y);
    return run_gemm(p_.gemm, w->raw(), cols, b ? b->raw() : nullptr, z ? z->raw() : nullptr,
                    y->raw(), g, p_.images);
  }

 private:
  ConvParams p_;
};

Expected<std::unique_ptr<Kernel>> make_conv(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return unsupported(ctx.where, ": float32 only");
  TERN_ASSIGN_OR_RETURN(ops::FusedConvParams f, ops::parse_conv_or_fused(ctx));
  TERN_ASSIGN_OR_RETURN(Chain chain, chain_of(ctx, f.epilogue));
  TERN_ASSIGN_OR_RETURN(ops::Window v, window_2d(ctx, f.conv.win));
  const ops::ConvParams& c = f.conv;
  ConvParams p;
  p.has_bias = c.has_bias;
  p.has_sum = f.has_sum;
  const int64_t N = c.x[0], C = c.x[1], M = c.w[0], Cg = c.w[1];
  const int64_t H = v.in[1], W = v.in[2], OH = v.out[1], OW = v.out[2];
  const int64_t KH = v.kernel[1], KW = v.kernel[2];
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(c.x)));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(c.y)));
  const int64_t algo = ctx.flag(FlagId::kVulkanConvAlgorithm);  // auto, direct, gemm
  const bool pointwise = KH == 1 && KW == 1 && v.strides[1] == 1 && v.strides[2] == 1 &&
                         v.pads_begin[1] == 0 && v.pads_begin[2] == 0 && v.pads_end[1] == 0 &&
                         v.pads_end[2] == 0;
  const int64_t cols = N * C * KH * KW * OH * OW * 4;
  if (c.group == 1 && algo != 1 && (pointwise || cols <= kMaxColumnBytes)) {
    TERN_RETURN_IF_ERROR(check_gemm_size(ctx, M, OH * OW, N));
    TERN_ASSIGN_OR_RETURN(p.gemm, pipeline("gemm_f32"));
    const int64_t K = C * KH * KW, P = OH * OW;
    GemmPush& g = p.gp;
    g.M = u32(M);
    g.N = u32(P);
    g.K = u32(K);
    g.sam = u32(K);  // A = W [M, K]
    g.sak = 1;
    g.sbb = u32(K * P);  // B = columns [K, P] per image (X itself when pointwise)
    g.sbk = u32(P);
    g.sbn = 1;
    g.scm = 1;  // bias per output channel (row)
    g.syb = u32(M * P);
    g.szb = u32(M * P);
    g.flags = (c.has_bias ? 1u : 0u) | (f.has_sum ? 2u : 0u);
    g.alpha = 1;
    g.beta = 1;
    g.acts = chain.acts;
    std::copy(chain.ap, chain.ap + 6, g.ap);
    p.images = u32(N);
    if (!pointwise) {
      TERN_ASSIGN_OR_RETURN(p.im2col, pipeline("im2col_f32"));
      p.ip = {u32(N),
              u32(C),
              u32(H),
              u32(W),
              u32(OH),
              u32(OW),
              u32(KH),
              u32(KW),
              u32(v.strides[1]),
              u32(v.strides[2]),
              u32(v.dilations[1]),
              u32(v.dilations[2]),
              u32(v.pads_begin[1]),
              u32(v.pads_begin[2]),
              0,
              0};
      p.workspace = static_cast<size_t>(cols);
    }
    return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(p));
  }
  TERN_ASSIGN_OR_RETURN(p.direct, pipeline("conv2d_f32"));
  p.dp = {u32(N),
          u32(C),
          u32(H),
          u32(W),
          u32(M),
          u32(OH),
          u32(OW),
          u32(Cg),
          u32(KH),
          u32(KW),
          u32(v.strides[1]),
          u32(v.strides[2]),
          u32(v.dilations[1]),
          u32(v.dilations[2]),
          u32(v.pads_begin[1]),
          u32(v.pads_begin[2]),
          u32(M / c.group),
          0,
          0,
          0,
          0,
          0,
          (c.has_bias ? 1u : 0u) | (f.has_sum ? 2u : 0u),
          chain.acts,
          {}};
  std::copy(chain.ap, chain.ap + 6, p.dp.ap);
  return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(p));
}

struct TransposePush {
  uint32_t N, C, H, W, M, OH, OW, Cg;
  uint32_t Mg, KH, KW, SH, SW, DH, DW, PH;
  uint32_t PW, ox, ow, ob, oy, has_bias;
};

struct TransposeParams {
  const Pipeline* pipe;
  TransposePush push;
};

Expected<std::unique_ptr<Kernel>> make_conv_transpose(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return unsupported(ctx.where, ": float32 only");
  TERN_ASSIGN_OR_RETURN(ops::ConvTransposeParams c, ops::parse_conv_transpose(ctx));
  TERN_ASSIGN_OR_RETURN(ops::Window v, window_2d(ctx, c.win));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(c.x)));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(c.y)));
  TransposeParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("conv_transpose_f32"));
  const int64_t M = c.y[1];
  p.push = {u32(c.x[0]),
            u32(c.x[1]),
            u32(v.in[1]),
            u32(v.in[2]),
            u32(M),
            u32(v.out[1]),
            u32(v.out[2]),
            u32(c.x[1] / c.group),
            u32(M / c.group),
            u32(v.kernel[1]),
            u32(v.kernel[2]),
            u32(v.strides[1]),
            u32(v.strides[2]),
            u32(v.dilations[1]),
            u32(v.dilations[2]),
            u32(v.pads_begin[1]),
            u32(v.pads_begin[2]),
            0,
            0,
            0,
            0,
            c.has_bias ? 1u : 0u};
  return make_kernel("vulkan_conv_transpose", p,
                     [](const TransposeParams& q, const KernelArgs& a, const ExecContext&) {
                       TransposePush push = q.push;
                       const Tensor* b = push.has_bias ? a.inputs[2] : nullptr;
                       push.ox = off(a.inputs[0]);
                       push.ow = off(a.inputs[1]);
                       push.ob = b ? off(b) : 0;
                       push.oy = off(a.outputs[0]);
                       return run_1d(q.pipe,
                                     {a.inputs[0]->raw(), a.inputs[1]->raw(),
                                      b ? b->raw() : a.outputs[0]->raw(), a.outputs[0]->raw()},
                                     push, numel(a.outputs[0]->shape()), 64);
                     });
}

struct PoolPush {
  uint32_t planes, H, W, OH, OW, KH, KW, SH;
  uint32_t SW, PH, PW, DH, DW, PHE, PWE, mode;
  uint32_t ox, oy;
};

struct PoolParams {
  const Pipeline* pipe;
  PoolPush push;
};

Expected<std::unique_ptr<Kernel>> make_pool(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(ops::PoolSpec spec, ops::device_pool_spec(ctx));
  TERN_ASSIGN_OR_RETURN(ops::Window v, window_2d(ctx, spec.win));
  if (spec.mode == ops::PoolMode::kLp2) return unsupported(ctx.where, ": LpPool on Vulkan");
  const uint32_t mode = spec.mode == ops::PoolMode::kMax             ? 0
                        : spec.mode == ops::PoolMode::kAvgExcludePad ? 1
                                                                     : 2;
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(x)));
  PoolParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("pool_f32"));
  p.push = {u32(x[0] * x[1]),
            u32(v.in[1]),
            u32(v.in[2]),
            u32(v.out[1]),
            u32(v.out[2]),
            u32(v.kernel[1]),
            u32(v.kernel[2]),
            u32(v.strides[1]),
            u32(v.strides[2]),
            u32(v.pads_begin[1]),
            u32(v.pads_begin[2]),
            u32(v.dilations[1]),
            u32(v.dilations[2]),
            u32(v.pads_end[1]),
            u32(v.pads_end[2]),
            mode,
            0,
            0};
  return make_kernel("vulkan_pool", p,
                     [](const PoolParams& q, const KernelArgs& a, const ExecContext&) {
                       PoolPush push = q.push;
                       push.ox = off(a.inputs[0]);
                       push.oy = off(a.outputs[0]);
                       return run_1d(q.pipe, {a.inputs[0]->raw(), a.outputs[0]->raw()}, push,
                                     numel(a.outputs[0]->shape()));
                     });
}

}  // namespace

}  // namespace tern::vk

namespace tern {

void register_vulkan_conv(KernelRegistry& r) {
  r.add("Conv", "vulkan", DType::kFloat32, vk::make_conv);
  r.add("FusedConv", "vulkan", DType::kFloat32, vk::make_conv);
  r.add("ConvTranspose", "vulkan", DType::kFloat32, vk::make_conv_transpose);
  r.add("MaxPool", "vulkan", DType::kFloat32, vk::make_pool);
  r.add("AveragePool", "vulkan", DType::kFloat32, vk::make_pool);
}

}  // namespace tern
