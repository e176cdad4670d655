// Element-wise ops on Vulkan: broadcasting binary arithmetic, unary math and activations (float32,
// and float16 where the device has 16-bit storage), Cast between float32/int32/int64 and inference
// BatchNormalization.
#include "backends/vulkan/ops/vulkan_ops.h"
#include "core/kernel_registry.h"

namespace tern::vk {

namespace {

struct BinaryPush {
  uint32_t n, rank, op, oa, ob, oy;
  uint32_t shape[kMaxRank], sa[kMaxRank], sb[kMaxRank];
};

struct BinaryParams {
  const Pipeline* pipe;
  BinaryPush push;
};

Expected<std::unique_ptr<Kernel>> make_binary(const OpContext& ctx) {
  static const char* kOps[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"};
  BinaryParams p{};
  uint32_t op = 8;
  for (uint32_t i = 0; i < 8; ++i) {
    if (ctx.node->op_type == kOps[i]) op = i;
  }
  if (op == 8) return unsupported(ctx.where, ": not a Vulkan binary op");
  if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1)) {
    return unsupported(ctx.where, ": the Vulkan kernel takes exactly two inputs");
  }
  const DType t = ctx.inputs[0].dtype;
  if (ctx.inputs[1].dtype != t) return unsupported(ctx.where, ": mixed input types");
  TERN_ASSIGN_OR_RETURN(std::string suffix, float_suffix(ctx, t, true));
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("binary_" + suffix));
  const Shape& as = ctx.inputs[0].shape;
  const Shape& bs = ctx.inputs[1].shape;
  const Shape& y = ctx.outputs[0].shape;
  if (y.size() > kMaxRank) return unsupported(ctx.where, ": rank ", y.size(), " on Vulkan");
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(y)));
  p.push.op = op;
  p.push.n = u32(numel(y));
  if (!(as == y && bs == y)) {
    p.push.rank = u32(static_cast<int64_t>(y.size()));
    const Shape sa = ops::contiguous_strides(as), sb = ops::contiguous_strides(bs);
    for (size_t k = 0; k < y.size(); ++k) {
      p.push.shape[k] = u32(y[k]);
      const size_t from_right = y.size() - k;
      if (from_right <= as.size()) {
        const size_t i = as.size() - from_right;
        p.push.sa[k] = as[i] == 1 ? 0 : u32(sa[i]);
      }
      if (from_right <= bs.size()) {
        const size_t i = bs.size() - from_right;
        p.push.sb[k] = bs[i] == 1 ? 0 : u32(sb[i]);
      }
    }
  }
  return make_elementwise_kernel(
      "vulkan_binary", p, [](const BinaryParams& q, const KernelArgs& a, const ExecContext&) {
        BinaryPush push = q.push;
        push.oa = off(a.inputs[0]);
        push.ob = off(a.inputs[1]);
        push.oy = off(a.outputs[0]);
        return run_1d(q.pipe, {a.inputs[0]->raw(), a.inputs[1]->raw(), a.outputs[0]->raw()}, push,
                      push.n);
      });
}

struct UnaryPush {
  uint32_t n, ox, oy, acts;
  float ap[6];
};

struct UnaryParams {
  const Pipeline* pipe;
  const Pipeline* vec4;  // float32 four at a time, when offsets allow
  UnaryPush push;
};

// The activation code and parameters of a unary op node.
Status unary_chain(const OpContext& ctx, Chain* c) {
  const std::string& op = ctx.node->op_type;
  const Attributes& at = ctx.attrs();
  static const std::pair<const char*, Act> kPlain[] = {
      {"Relu", kRelu},         {"Sigmoid", kSigmoid},
      {"Tanh", kTanh},         {"Erf", kErf},
      {"Sqrt", kSqrt},         {"Exp", kExp},
      {"Log", kLog},           {"Neg", kNeg},
      {"Abs", kAbs},           {"Reciprocal", kReciprocal},
      {"Softplus", kSoftplus}, {"Ceil", kCeil},
      {"Floor", kFloor},       {"Round", kRound},
      {"Sin", kSin},           {"Cos", kCos},
      {"Sign", kSign},         {"HardSwish", kHardSwish},
      {"Mish", kMish}};
  for (const auto& [name, act] : kPlain) {
    if (op == name) return chain_add(ctx, c, act);
  }
  if (op == "LeakyRelu") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 0.01f));
    return chain_add(ctx, c, kLeakyRelu, a);
  }
  if (op == "Elu") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 1.0f));
    return chain_add(ctx, c, kElu, a);
  }
  if (op == "Swish") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 1.0f));
    return chain_add(ctx, c, kSwish, a);
  }
  if (op == "Selu") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 1.67326319217681884765625f));
    TERN_ASSIGN_OR_RETURN(float g, at.get_float("gamma", 1.05070102214813232421875f));
    return chain_add(ctx, c, kSelu, a, g);
  }
  if (op == "HardSigmoid") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 0.2f));
    TERN_ASSIGN_OR_RETURN(float b, at.get_float("beta", 0.5f));
    return chain_add(ctx, c, kHardSigmoid, a, b);
  }
  if (op == "Gelu") {
    TERN_ASSIGN_OR_RETURN(std::string approx, at.get_string("approximate", "none"));
    if (approx != "none") return unsupported(ctx.where, ": Gelu approximate='", approx, "'");
    return chain_add(ctx, c, kGelu);
  }
  if (op == "Clip") {
    float lo = -3.4028234663852886e38f, hi = 3.4028234663852886e38f;
    if (ctx.opset < 11) {
      TERN_ASSIGN_OR_RETURN(lo, at.get_float("min", lo));
      TERN_ASSIGN_OR_RETURN(hi, at.get_float("max", hi));
    } else {
      for (size_t i = 1; i < 3; ++i) {
        if (!ctx.has_input(i)) continue;
        const TensorInfo& in = ctx.inputs[i];
        if (!in.value || in.value->numel() != 1) {
          return unsupported(ctx.where, ": Clip bounds must be constants on Vulkan");
        }
        (i == 1 ? lo : hi) = static_cast<float>(in.value->float_at(0));
      }
    }
    return chain_add(ctx, c, kClip, lo, hi);
  }
  return unsupported(ctx.where, ": not a Vulkan unary op");
}

Expected<std::unique_ptr<Kernel>> make_unary(const OpContext& ctx) {
  UnaryParams p{};
  Chain c;
  TERN_RETURN_IF_ERROR(unary_chain(ctx, &c));
  const DType t = ctx.inputs[0].dtype;
  TERN_ASSIGN_OR_RETURN(std::string suffix, float_suffix(ctx, t));
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("unary_" + suffix));
  const int64_t n = numel(ctx.outputs[0].shape);
  TERN_RETURN_IF_ERROR(check_count(ctx, n));
  if (t == DType::kFloat32 && n % 4 == 0) {
    TERN_ASSIGN_OR_RETURN(p.vec4, pipeline("unary_f32_vec4"));
  }
  p.push.n = u32(n);
  p.push.acts = c.acts;
  std::copy(c.ap, c.ap + 6, p.push.ap);
  return make_elementwise_kernel("vulkan_unary", p,
                                 [](const UnaryParams& q, const KernelArgs& a, const ExecContext&) {
                                   UnaryPush push = q.push;
                                   push.ox = off(a.inputs[0]);
                                   push.oy = off(a.outputs[0]);
                                   const void* x = a.inputs[0]->raw();
                                   void* y = a.outputs[0]->raw();
                                   if (q.vec4 && push.ox % 4 == 0 && push.oy % 4 == 0) {
                                     push.n /= 4;
                                     push.ox /= 4;
                                     push.oy /= 4;
                                     return run_1d(q.vec4, {x, y}, push, push.n);
                                   }
                                   return run_1d(q.pipe, {x, y}, push, push.n);
                                 });
}

struct CastPush {
  uint32_t n, from, to, ox, oy;
};

struct CastParams {
  const Pipeline* pipe;
  CastPush push;
};

Expected<std::unique_ptr<Kernel>> make_cast(const OpContext& ctx) {
  auto kind = [](DType t) -> int {
    if (t == DType::kFloat32) return 0;
    if (t == DType::kInt32) return 1;
    if (t == DType::kInt64) return 2;
    return -1;
  };
  const DType from = ctx.inputs[0].dtype, to = ctx.outputs[0].dtype;
  if (kind(from) < 0 || kind(to) < 0) {
    return unsupported(ctx.where, ": Vulkan casts float32, int32 and int64 (not ", dtype_name(from),
                       " -> ", dtype_name(to), ")");
  }
  CastParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("cast"));
  const int64_t n = numel(ctx.outputs[0].shape);
  TERN_RETURN_IF_ERROR(check_count(ctx, n));
  p.push = {u32(n), static_cast<uint32_t>(kind(from)), static_cast<uint32_t>(kind(to)), 0, 0};
  return make_kernel(
      "vulkan_cast", p, [](const CastParams& q, const KernelArgs& a, const ExecContext&) {
        CastPush push = q.push;
        push.ox = off(a.inputs[0], 4);
        push.oy = off(a.outputs[0], 4);
        return run_1d(q.pipe, {a.inputs[0]->raw(), a.outputs[0]->raw()}, push, push.n);
      });
}

struct BatchNormPush {
  uint32_t n, C, inner, ox, os, ob, om, ov, oy;
  float eps;
  uint32_t relu;  // FusedBatchNormalization (a CPU session's optimized graph, saved)
};

struct BatchNormParams {
  const Pipeline* pipe;
  BatchNormPush push;
};

Expected<std::unique_ptr<Kernel>> make_batch_norm(const OpContext& ctx) {
  for (size_t i = 0; i < 5; ++i) {
    if (!ctx.has_input(i) || ctx.inputs[i].dtype != DType::kFloat32) {
      return unsupported(ctx.where, ": Vulkan BatchNormalization takes five float32 inputs");
    }
  }
  for (size_t o = 1; o < ctx.outputs.size(); ++o) {
    if (ctx.outputs[o].present) return unsupported(ctx.where, ": training outputs");
  }
  // Training mode normalises with the batch's statistics even when only Y is wanted.
  TERN_ASSIGN_OR_RETURN(int64_t training, ctx.attrs().get_int("training_mode", 0));
  if (training != 0) return unsupported(ctx.where, ": training mode runs on the CPU");
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() < 2) return unsupported(ctx.where, ": input of rank < 2");
  BatchNormParams p{};
  TERN_ASSIGN_OR_RETURN(p.pipe, pipeline("batchnorm_f32"));
  TERN_RETURN_IF_ERROR(check_count(ctx, numel(x)));
  int64_t inner = 1;
  for (size_t d = 2; d < x.size(); ++d) inner *= x[d];
  p.push.n = u32(numel(x));
  p.push.C = u32(x[1]);
  p.push.inner = u32(inner);
  TERN_ASSIGN_OR_RETURN(p.push.eps, ctx.attrs().get_float("epsilon", 1e-5f));
  if (ctx.node->op_type == "FusedBatchNormalization") {
    TERN_ASSIGN_OR_RETURN(std::vector<std::string> acts,
                          ctx.attrs().get_strings("activations", {}));
    if (acts != std::vector<std::string>{"Relu"}) {
      return unsupported(ctx.where, ": a fused activation other than Relu");
    }
    p.push.relu = 1;
  }
  return make_elementwise_kernel(
      "vulkan_batch_norm", p,
      [](const BatchNormParams& q, const KernelArgs& a, const ExecContext&) {
        BatchNormPush push = q.push;
        push.ox = off(a.inputs[0]);
        push.os = off(a.inputs[1]);
        push.ob = off(a.inputs[2]);
        push.om = off(a.inputs[3]);
        push.ov = off(a.inputs[4]);
        push.oy = off(a.outputs[0]);
        return run_1d(q.pipe,
                      {a.inputs[0]->raw(), a.inputs[1]->raw(), a.inputs[2]->raw(),
                       a.inputs[3]->raw(), a.inputs[4]->raw(), a.outputs[0]->raw()},
                      push, push.n);
      });
}

}  // namespace

}  // namespace tern::vk

namespace tern {

void register_vulkan_elementwise(KernelRegistry& r) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"}) {
    r.add(op, "vulkan", DType::kUndefined, vk::make_binary);
  }
  for (const char* op :
       {"Relu", "Sigmoid",     "Tanh",       "Erf",       "Sqrt", "Exp",       "Log",
        "Neg",  "Abs",         "Reciprocal", "Softplus",  "Ceil", "Floor",     "Round",
        "Sin",  "Cos",         "Sign",       "HardSwish", "Mish", "LeakyRelu", "Elu",
        "Selu", "HardSigmoid", "Gelu",       "Clip",      "Swish"}) {
    r.add(op, "vulkan", DType::kUndefined, vk::make_unary);
  }
  r.add("Cast", "vulkan", DType::kUndefined, vk::make_cast);
  r.add("BatchNormalization", "vulkan", DType::kFloat32, vk::make_batch_norm);
  r.add("FusedBatchNormalization", "vulkan", DType::kFloat32, vk::make_batch_norm);
}

}  // namespace tern
