// See widened_kernel.h.
#include "backends/cpu/widened_kernel.h"

#include <string>
#include <vector>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/float_rows.h"
#include "backends/cpu/vec/vec.h"
#include "core/op_registry.h"
#include "core/parallel.h"

namespace tern {
namespace {

bool is_half(DType dt) {
  return dt == DType::kFloat16 || dt == DType::kBFloat16;
}

size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

constexpr int64_t kConvertGrain = 1 << 15;

class WidenedKernel final : public Kernel {
 public:
  struct Input {
    DType from = DType::kUndefined;    // kUndefined: passed through
    const Tensor* constant = nullptr;  // widened at prepare (owned by constants_)
    size_t offset = 0;                 // of its float32 copy in the workspace
  };
  struct Output {
    DType to = DType::kUndefined;  // kUndefined: passed through
    size_t offset = 0;
  };

  std::unique_ptr<Kernel> inner;
  std::string label;
  std::vector<Input> ins;
  std::vector<Output> outs;
  std::vector<std::unique_ptr<Tensor>> constants;
  size_t scratch = 0;
  const VecOps* vec = nullptr;

  const char* name() const override { return label.c_str(); }
  size_t workspace_bytes() const override { return scratch + inner->workspace_bytes(); }
  size_t packed_bytes() const override { return inner->packed_bytes(); }

  Status run(const KernelArgs& args, const ExecContext& exec) const override {
    auto* ws = static_cast<uint8_t*>(args.workspace);
    std::vector<Tensor> wide_in(ins.size()), wide_out(outs.size());
    KernelArgs a;
    a.workspace = ws ? ws + scratch : nullptr;
    for (size_t i = 0; i < ins.size(); ++i) {
      const Tensor* t = i < args.inputs.size() ? args.inputs[i] : nullptr;
      if (!t || ins[i].from == DType::kUndefined) {
        a.inputs.push_back(t);
      } else if (ins[i].constant) {
        a.inputs.push_back(ins[i].constant);
      } else {
        auto* f = reinterpret_cast<float*>(ws + ins[i].offset);
        widen_to_f32(*vec, ins[i].from, t->raw(), f, t->numel(), exec.num_threads);
        wide_in[i] = Tensor::wrap(DType::kFloat32, t->shape(), f, nullptr);
        a.inputs.push_back(&wide_in[i]);
      }
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      Tensor* t = i < args.outputs.size() ? args.outputs[i] : nullptr;
      if (!t || outs[i].to == DType::kUndefined) {
        a.outputs.push_back(t);
      } else {
        wide_out[i] = Tensor::wrap(DType::kFloat32, t->shape(),
                                   reinterpret_cast<float*>(ws + outs[i].offset), nullptr);
        a.outputs.push_back(&wide_out[i]);
      }
    }
    TERN_RETURN_IF_ERROR(inner->run(a, exec));
    for (size_t i = 0; i < outs.size(); ++i) {
      Tensor* t = i < args.outputs.size() ? args.outputs[i] : nullptr;
      if (!t || outs[i].to == DType::kUndefined) continue;
      narrow_from_f32(*vec, outs[i].to, wide_out[i].data<float>(), t->raw(), t->numel(),
                      exec.num_threads);
    }
    return Status::ok();
  }
};

}  // namespace

bool has_half_values(const OpContext& ctx) {
  for (const TensorInfo& t : ctx.inputs) {
    if (t.present && is_half(t.dtype)) return true;
  }
  for (const TensorInfo& t : ctx.outputs) {
    if (t.present && is_half(t.dtype)) return true;
  }
  return false;
}

void widen_to_f32(const VecOps& v, DType from, const void* src, float* dst, int64_t n,
                  int threads) {
  const auto* s = static_cast<const uint16_t*>(src);
  parallel_for(n, kConvertGrain, threads,
               [&](int64_t b, int64_t e) { widen_row(&v, from, s + b, dst + b, e - b); });
}

void narrow_from_f32(const VecOps& v, DType to, const float* src, void* dst, int64_t n,
                     int threads) {
  auto* d = static_cast<uint16_t*>(dst);
  parallel_for(n, kConvertGrain, threads,
               [&](int64_t b, int64_t e) { narrow_row(&v, to, src + b, d + b, e - b); });
}

Expected<std::unique_ptr<Kernel>> prepare_widened(
    const OpContext& ctx,
    const std::function<Expected<std::unique_ptr<Kernel>>(const OpContext&)>& prepare_f32) {
  const std::string& op = ctx.node->op_type;
  if (ctx.outputs_from_run || ctx.needs_values) {
    return unsupported(ctx.where, ": float16 through float32 needs its output shapes ahead");
  }
  for (const auto& [name, attr] : ctx.attrs().all()) {
    if (!attr.graphs.empty() || attr.g) {
      return unsupported(ctx.where, ": a node with subgraphs is not widened to float32");
    }
  }
  const OpSchema* schema = OpRegistry::global().find(op);
  if (!schema) return unsupported(ctx.where, ": unknown op");
  auto k = std::make_unique<WidenedKernel>();
  k->vec = &vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)));
  OpContext w = ctx;
  w.weights = nullptr;  // the widened constants are this kernel's, not the session's
  for (size_t i = 0; i < w.inputs.size(); ++i) {
    TensorInfo& t = w.inputs[i];
    WidenedKernel::Input in;
    if (t.block != 0) return unsupported(ctx.where, ": blocked layouts are not widened");
    if (t.present && is_half(t.dtype)) {
      in.from = t.dtype;
      t.dtype = DType::kFloat32;
      t.packed = nullptr;
      if (t.value) {
        auto c = std::make_unique<Tensor>();
        TERN_ASSIGN_OR_RETURN(*c, Tensor::allocate_uninitialized(DType::kFloat32, t.shape));
        widen_to_f32(*k->vec, in.from, t.value->raw(), c->data<float>(), c->numel(), 1);
        t.value = c.get();
        in.constant = c.get();
        k->constants.push_back(std::move(c));
      } else {
        in.offset = k->scratch;
        k->scratch += align64(static_cast<size_t>(numel(t.shape)) * sizeof(float));
      }
    }
    k->ins.push_back(in);
  }
  // The float32 node's outputs: the same but float32 where the node's are half.
  for (TensorInfo& t : w.outputs) {
    const bool present = t.present;
    reset_info(&t);
    t.present = present;
  }
  w.output_values.clear();
  Status inferred = infer_node(*schema, w);
  if (!inferred.is_ok()) {
    return unsupported(ctx.where, ": its float32 form does not infer: ", inferred.message());
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const TensorInfo& want = ctx.outputs[i];
    TensorInfo& got = w.outputs[i];
    WidenedKernel::Output out;
    if (want.present) {
      if (want.block != 0) return unsupported(ctx.where, ": blocked layouts are not widened");
      const bool ok = got.shape == want.shape && (is_half(want.dtype) ? got.dtype == DType::kFloat32
                                                                      : got.dtype == want.dtype);
      if (!ok) {
        return unsupported(ctx.where, ": its float32 form gives output ", i, " as ",
                           dtype_name(got.dtype), " ", shape_str(got.shape));
      }
      if (is_half(want.dtype)) {
        out.to = want.dtype;
        out.offset = k->scratch;
        k->scratch += align64(static_cast<size_t>(numel(want.shape)) * sizeof(float));
      }
    }
    k->outs.push_back(out);
  }
  TERN_ASSIGN_OR_RETURN(k->inner, prepare_f32(w));
  k->label = std::string(k->inner->name()) + " via float32";
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace tern
