#include "core/node_context.h"

#include "core/op_registry.h"

namespace tern {

Status make_node_context(const Graph& g, const Node& node, const std::string& where,
                         const std::vector<PlannedValue>& values, OpContext* ctx) {
  const OpSchema* schema = OpRegistry::global().find(node.op_type);
  if (!schema) return internal_error(where, ": no schema for ", node.op_type);
  // Assigned field by field, so a context made again (a plan for other shapes) keeps the storage
  // of its shapes and names.
  ctx->node = &node;
  ctx->where = where;
  ctx->opset = g.opset;
  ctx->needs_values = false;
  ctx->outputs_from_run = false;
  ctx->output_values.clear();
  ctx->inputs.resize(node.inputs.size());
  ctx->input_names.resize(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    TensorInfo& ti = ctx->inputs[i];
    const int id = node.inputs[i];
    reset_info(&ti);
    if (id < 0) {
      ctx->input_names[i].clear();
      continue;
    }
    const PlannedValue& pv = values[static_cast<size_t>(id)];
    ti.present = true;
    ti.dtype = pv.dtype;
    ti.shape = pv.shape;
    ti.block = pv.block;
    ti.value = pv.where == PlannedValue::Where::kConstant ? pv.constant : nullptr;
    if (ti.value && static_cast<size_t>(id) < g.values.size()) {
      const Value& gv = g.values[static_cast<size_t>(id)];
      ti.graph_constant = gv.constant && &*gv.constant == ti.value;
      if (!gv.packed.empty() && ti.graph_constant) ti.packed = &gv.packed;
    }
    ctx->input_names[i] = g.value_name(id);
  }
  ctx->outputs.resize(node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    reset_info(&ctx->outputs[i]);
    ctx->outputs[i].present = node.outputs[i] >= 0;
  }
  for (int vi : schema->value_inputs) {
    const size_t i = static_cast<size_t>(vi);
    if (ctx->has_input(i) && !ctx->inputs[i].value) {
      ctx->needs_values = true;
      return unsupported(ctx->where, ": input ", i, " '", ctx->input_names[i],
                         "' decides the output shape but is computed from data at run time "
                         "(data-dependent shapes are not supported yet)");
    }
  }
  TERN_RETURN_IF_ERROR(infer_node(*schema, *ctx));
  for (size_t i = 0; i < ctx->outputs.size(); ++i) {
    // (A node whose outputs only its run knows may not know their dtype either.)
    if (ctx->outputs[i].present && ctx->outputs[i].dtype == DType::kUndefined &&
        !ctx->outputs_from_run) {
      return internal_error(ctx->where, ": shape inference left output ", i, " untyped");
    }
    if (ctx->outputs[i].present && !dtype_built(ctx->outputs[i].dtype)) {
      return require_dtype_built(ctx->outputs[i].dtype, str_cat(ctx->where, ": output ", i));
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> prepare_on_host(const OpContext& ctx,
                                                  const std::vector<Backend*>& backends,
                                                  Backend** backend) {
  Status last = Status::ok();  // (the message is made only when it is needed)
  for (Backend* b : backends) {
    if (!b->is_host()) continue;
    auto kernel = b->prepare(ctx);
    if (kernel) {
      *backend = b;
      return kernel;
    }
    last = kernel.status().with_prefix(ctx.where);
    if (last.code() != Code::kUnsupported) return last;
  }
  if (last.is_ok()) return unsupported(ctx.where, ": no backend can evaluate it");
  return last;
}

Status run_prepared(const OpContext& ctx, const Kernel& kernel, Backend* backend,
                    const FlagValues& flags, std::vector<Tensor>* outputs,
                    const RunControl* control) {
  const int threads = static_cast<int>(flags[FlagId::kNumThreads]);
  KernelArgs args;
  for (const TensorInfo& in : ctx.inputs) args.inputs.push_back(in.present ? in.value : nullptr);
  outputs->assign(ctx.outputs.size(), Tensor());
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (!ctx.outputs[i].present) {  // an omitted optional output: nothing to compute
      args.outputs.push_back(nullptr);
      continue;
    }
    // Outputs known only when the node runs, sequences and optionals: the kernel makes them.
    if (!ctx.outputs_from_run && !dtype_is_composite(ctx.outputs[i].dtype)) {
      // Not zeroed: the kernel writes all of it, as in a planned run (whose arena is reused).
      TERN_ASSIGN_OR_RETURN((*outputs)[i], Tensor::allocate_uninitialized(ctx.outputs[i].dtype,
                                                                          ctx.outputs[i].shape));
    }
    args.outputs.push_back(&(*outputs)[i]);
  }
  std::shared_ptr<void> workspace;
  if (size_t ws = kernel.workspace_bytes()) {
    workspace = aligned_buffer(ws);
    if (!workspace) return out_of_memory(ctx.where, ": workspace of ", ws, " bytes");
    args.workspace = workspace.get();
  }
  backend->set_num_threads(threads);
  ExecContext exec{threads, flags.on(FlagId::kDeterministicAlgorithms), control,
                   flags.on(FlagId::kBlasVerbose)};
  TERN_RETURN_IF_ERROR(kernel.run(args, exec).with_prefix(ctx.where));
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const Tensor& t = (*outputs)[i];
    const bool made = ctx.outputs_from_run || dtype_is_composite(ctx.outputs[i].dtype);
    const bool dtype_ok =
        ctx.outputs[i].dtype == DType::kUndefined || t.dtype() == ctx.outputs[i].dtype;
    if (made && ctx.outputs[i].present && (!t.defined() || !dtype_ok)) {
      return internal_error(ctx.where, ": output ", i, " is ",
                            t.defined() ? dtype_name(t.dtype()) : "missing", ", inference said ",
                            dtype_name(ctx.outputs[i].dtype));
    }
  }
  return Status::ok();
}

bool outputs_fit(const OpContext& ctx, int64_t cap) {
  int64_t bytes = 0;
  for (const TensorInfo& t : ctx.outputs) {
    if (!t.present) continue;
    int64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return false;
      n = d != 0 && n > cap / d ? cap + 1 : n * d;
    }
    bytes += n * static_cast<int64_t>(dtype_size(t.dtype));
    if (bytes > cap) return false;
  }
  return true;
}

Status evaluate_node(const OpContext& ctx, const std::vector<Backend*>& backends,
                     const FlagValues& flags, std::vector<Tensor>* outputs) {
  Backend* backend = nullptr;
#if !defined(TERN_MINIMAL)
  // oneDNN sizes a primitive's work split by the thread count current when it is made.
  for (Backend* b : backends) {
    if (b->is_host()) b->set_num_threads(static_cast<int>(flags[FlagId::kNumThreads]));
  }
#endif
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, prepare_on_host(ctx, backends, &backend));
  return run_prepared(ctx, *kernel, backend, flags, outputs);
}

}  // namespace tern
