// Element-wise ops on CUDA: broadcasting binary arithmetic, unary math and activations (one
// kernel applies a chain of them), Cast and inference BatchNormalization.
#include <cmath>
#include <limits>

#include "backends/cuda/ops/cuda_ops.h"
#include "core/kernel_registry.h"

namespace tern::cuda {

namespace {

struct BinaryParams {
  BinaryOp op;
  Elem t;
  Broadcast d;
  int64_t n;
};

Expected<std::unique_ptr<Kernel>> make_binary(const OpContext& ctx) {
  static const std::pair<const char*, BinaryOp> kOps[] = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub},    {"Mul", BinaryOp::kMul},
      {"Div", BinaryOp::kDiv}, {"Pow", BinaryOp::kPow},    {"Max", BinaryOp::kMax},
      {"Min", BinaryOp::kMin}, {"PRelu", BinaryOp::kPRelu}};
  BinaryParams p{};
  bool found = false;
  for (const auto& [name, op] : kOps) {
    if (ctx.node->op_type == name) {
      p.op = op;
      found = true;
    }
  }
  if (!found) return unsupported(ctx.where, ": not a CUDA binary op");
  if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1)) {
    return unsupported(ctx.where, ": the CUDA kernel takes exactly two inputs");
  }
  const DType t = ctx.inputs[0].dtype;
  if (ctx.inputs[1].dtype != t) return unsupported(ctx.where, ": mixed input types");
  TERN_ASSIGN_OR_RETURN(p.t, elem_for(ctx, t, "binary"));
  if (p.t == Elem::kU8 || p.t == Elem::kBool) return unsupported(ctx.where, ": ", dtype_name(t));
  TERN_ASSIGN_OR_RETURN(
      p.d, make_broadcast(ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.outputs[0].shape));
  p.n = numel(ctx.outputs[0].shape);
  return make_kernel("cuda_binary", p,
                     [](const BinaryParams& q, const KernelArgs& a, const ExecContext&) {
                       return launched(binary(q.op, q.t, a.inputs[0]->raw(), a.inputs[1]->raw(),
                                              a.outputs[0]->raw(), q.n, q.d, stream()),
                                       "binary");
                     });
}

struct UnaryParams {
  ActChain chain;
  Elem t;
  int64_t n;
};

// The activation step of a unary op node, or UNSUPPORTED.
Expected<ActStep> unary_step(const OpContext& ctx) {
  const std::string& op = ctx.node->op_type;
  const Attributes& at = ctx.attrs();
  static const std::pair<const char*, Act> kPlain[] = {
      {"Relu", Act::kRelu},         {"Sigmoid", Act::kSigmoid},
      {"Tanh", Act::kTanh},         {"Erf", Act::kErf},
      {"Sqrt", Act::kSqrt},         {"Exp", Act::kExp},
      {"Log", Act::kLog},           {"Neg", Act::kNeg},
      {"Abs", Act::kAbs},           {"Reciprocal", Act::kReciprocal},
      {"Softplus", Act::kSoftplus}, {"Ceil", Act::kCeil},
      {"Floor", Act::kFloor},       {"Round", Act::kRound},
      {"Sin", Act::kSin},           {"Cos", Act::kCos},
      {"Sign", Act::kSign},         {"HardSwish", Act::kHardSwish},
      {"Mish", Act::kMish}};
  for (const auto& [name, act] : kPlain) {
    if (op == name) return ActStep{act, 0, 0};
  }
  if (op == "LeakyRelu") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 0.01f));
    return ActStep{Act::kLeakyRelu, a, 0};
  }
  if (op == "Elu") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 1.0f));
    return ActStep{Act::kElu, a, 0};
  }
  if (op == "Swish") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 1.0f));
    return ActStep{Act::kSwish, a, 0};
  }
  if (op == "Selu") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 1.67326319217681884765625f));
    TERN_ASSIGN_OR_RETURN(float g, at.get_float("gamma", 1.05070102214813232421875f));
    return ActStep{Act::kSelu, a, g};
  }
  if (op == "HardSigmoid") {
    TERN_ASSIGN_OR_RETURN(float a, at.get_float("alpha", 0.2f));
    TERN_ASSIGN_OR_RETURN(float b, at.get_float("beta", 0.5f));
    return ActStep{Act::kHardSigmoid, a, b};
  }
  if (op == "Gelu") {
    const Attribute* ap = at.find("approximate");
    const bool tanh = ap && ap->kind == Attribute::Kind::kString && ap->s == "tanh";
    if (ap && !tanh && !(ap->kind == Attribute::Kind::kString && ap->s == "none")) {
      return invalid_model(ctx.where, ": Gelu approximate must be 'none' or 'tanh'");
    }
    return ActStep{tanh ? Act::kGeluTanh : Act::kGeluErf, 0, 0};
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (ctx.opset < 11) {
      TERN_ASSIGN_OR_RETURN(lo, at.get_float("min", lo));
      TERN_ASSIGN_OR_RETURN(hi, at.get_float("max", hi));
    } else {
      if (ctx.has_input(1)) {
        TERN_ASSIGN_OR_RETURN(lo, constant_scalar(ctx, 1));
      }
      if (ctx.has_input(2)) {
        TERN_ASSIGN_OR_RETURN(hi, constant_scalar(ctx, 2));
      }
    }
    return ActStep{Act::kClip, lo, hi};
  }
  return unsupported(ctx.where, ": no CUDA kernel for ", op);
}

Expected<std::unique_ptr<Kernel>> make_unary(const OpContext& ctx) {
  UnaryParams p{};
  const DType t = ctx.inputs[0].dtype;
  if (t != DType::kFloat32 && t != DType::kFloat16) {
    return unsupported(ctx.where, ": the CUDA activation kernels take float32 and float16");
  }
  TERN_ASSIGN_OR_RETURN(p.t, elem_for(ctx, t, "unary"));
  TERN_ASSIGN_OR_RETURN(ActStep st, unary_step(ctx));
  p.chain.n = 1;
  p.chain.steps[0] = st;
  p.n = numel(ctx.outputs[0].shape);
  return make_elementwise_kernel(
      "cuda_unary", p, [](const UnaryParams& q, const KernelArgs& a, const ExecContext&) {
        return launched(unary(q.chain, q.t, a.inputs[0]->raw(), a.outputs[0]->raw(), q.n, stream()),
                        "unary");
      });
}

struct CastParams {
  Elem from, to;
  int64_t n;
};

Expected<std::unique_ptr<Kernel>> make_cast(const OpContext& ctx) {
  CastParams p{};
  TERN_ASSIGN_OR_RETURN(p.from, elem_for(ctx, ctx.inputs[0].dtype, "Cast"));
  TERN_ASSIGN_OR_RETURN(p.to, elem_for(ctx, ctx.outputs[0].dtype, "Cast"));
  p.n = numel(ctx.outputs[0].shape);
  return make_kernel(
      "cuda_cast", p, [](const CastParams& q, const KernelArgs& a, const ExecContext&) {
        if (q.from == q.to) {
          if (a.inputs[0]->raw() == a.outputs[0]->raw()) return Status::ok();
          return check(
              cudaMemcpyAsync(a.outputs[0]->raw(), a.inputs[0]->raw(), a.outputs[0]->byte_size(),
                              cudaMemcpyDeviceToDevice, stream()),
              "Cast copy");
        }
        return launched(cast(q.from, q.to, a.inputs[0]->raw(), a.outputs[0]->raw(), q.n, stream()),
                        "cast");
      });
}

struct BatchNormParams {
  int64_t n, channels, inner;
  float eps;
  bool relu;  // FusedBatchNormalization (a CPU session's optimized graph, saved)
};

Expected<std::unique_ptr<Kernel>> make_batch_norm(const OpContext& ctx) {
  for (size_t i = 0; i < 5; ++i) {
    if (!ctx.has_input(i) || ctx.inputs[i].dtype != DType::kFloat32) {
      return unsupported(ctx.where, ": the CUDA BatchNormalization takes five float32 inputs");
    }
  }
  TERN_ASSIGN_OR_RETURN(int64_t training, ctx.attrs().get_int("training_mode", 0));
  if (training || ctx.outputs.size() > 1) {
    return unsupported(ctx.where, ": training mode runs on the CPU");
  }
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() < 2) return unsupported(ctx.where, ": input of rank < 2");
  BatchNormParams p{};
  p.relu = ctx.node->op_type == "FusedBatchNormalization";
  if (p.relu) {
    TERN_ASSIGN_OR_RETURN(std::vector<std::string> acts,
                          ctx.attrs().get_strings("activations", {}));
    if (acts != std::vector<std::string>{"Relu"}) {
      return unsupported(ctx.where, ": a fused activation other than Relu");
    }
  }
  p.n = numel(x);
  p.channels = x[1];
  p.inner = 1;
  for (size_t d = 2; d < x.size(); ++d) p.inner *= x[d];
  TERN_ASSIGN_OR_RETURN(p.eps, ctx.attrs().get_float("epsilon", 1e-5f));
  return make_kernel(
      "cuda_batch_norm", p, [](const BatchNormParams& q, const KernelArgs& a, const ExecContext&) {
        auto f = [&](size_t i) { return a.inputs[i]->data<float>(); };
        float* y = a.outputs[0]->data<float>();
        TERN_RETURN_IF_ERROR(launched(
            batch_norm(f(0), f(1), f(2), f(3), f(4), y, q.n, q.channels, q.inner, q.eps, stream()),
            "batch_norm"));
        if (!q.relu) return Status::ok();
        ActChain relu;
        relu.n = 1;
        relu.steps[0] = ActStep{Act::kRelu, 0, 0};
        return launched(bias_act(y, nullptr, nullptr, q.n, 1, 1, relu, stream()), "bias_act");
      });
}

}  // namespace

}  // namespace tern::cuda

namespace tern {

void register_cuda_elementwise(KernelRegistry& r) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"}) {
    r.add(op, "cuda", DType::kUndefined, cuda::make_binary);
  }
  for (const char* op :
       {"Relu", "Sigmoid",     "Tanh",       "Erf",       "Sqrt", "Exp",       "Log",
        "Neg",  "Abs",         "Reciprocal", "Softplus",  "Ceil", "Floor",     "Round",
        "Sin",  "Cos",         "Sign",       "HardSwish", "Mish", "LeakyRelu", "Elu",
        "Selu", "HardSigmoid", "Gelu",       "Clip",      "Swish"}) {
    r.add(op, "cuda", DType::kUndefined, cuda::make_unary);
  }
  r.add("Cast", "cuda", DType::kUndefined, cuda::make_cast);
  r.add("BatchNormalization", "cuda", DType::kFloat32, cuda::make_batch_norm);
  r.add("FusedBatchNormalization", "cuda", DType::kFloat32, cuda::make_batch_norm);
}

}  // namespace tern
