#include "core/session.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/memory_plan.h"

namespace tern {

namespace {

// Plans for this many distinct input-shape signatures are kept; older ones are dropped.
constexpr size_t kMaxCachedPlans = 32;

std::string dims_str(const IOInfo& info) {
  std::string s = "[";
  for (size_t i = 0; i < info.dims.size(); ++i) {
    if (i) s += ",";
    s += info.dims[i] < 0 ? "?" : std::to_string(info.dims[i]);
  }
  return s + "]";
}

}  // namespace

std::shared_ptr<void> Plan::acquire_arena() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_arenas_.empty()) {
      auto a = std::move(free_arenas_.back());
      free_arenas_.pop_back();
      return a;
    }
  }
  return aligned_buffer(arena_bytes);
}

void Plan::release_arena(std::shared_ptr<void> arena) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_arenas_.push_back(std::move(arena));
}

Expected<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model,
                                                   SessionConfig config) {
  if (config.backends.empty()) return invalid_argument("no backend given");
  std::unique_ptr<Session> s(new Session());
  s->model_ = std::move(model);
  s->config_ = std::move(config);
  const Graph& g = s->model_->graph();
  TERN_ASSIGN_OR_RETURN(s->order_, g.topological_order());
  s->schemas_.assign(g.nodes.size(), nullptr);
  const OpRegistry& ops = OpRegistry::global();
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (!node.domain.empty() && node.domain != "ai.onnx") {
      return unsupported(g.describe_node(n), ": op domain '", node.domain, "' is not supported");
    }
    const OpSchema* schema = ops.find(node.op_type);
    if (!schema) {
      return unsupported(g.describe_node(n), ": op type ", node.op_type,
                         " is not supported by Tern");
    }
    bool any = std::any_of(s->config_.backends.begin(), s->config_.backends.end(),
                           [&](Backend* b) { return b->supports_op(node.op_type); });
    if (!any) {
      return unsupported(g.describe_node(n), ": no selected backend implements ", node.op_type);
    }
    s->schemas_[n] = schema;
  }
  TERN_RETURN_IF_ERROR(s->fold_constants());
  // With static input shapes the plan is built now: shape errors show at creation, not first run.
  std::vector<Shape> shapes;
  bool all_static = true;
  for (const IOInfo& in : s->model_->inputs()) {
    bool st = in.has_shape &&
              std::all_of(in.dims.begin(), in.dims.end(), [](int64_t d) { return d >= 0; });
    all_static = all_static && st;
    shapes.push_back(in.dims);
  }
  if (all_static) TERN_RETURN_IF_ERROR(s->plan_for(shapes).status());
  return s;
}

Status Session::make_context(size_t n, const std::vector<PlannedValue>& values,
                             OpContext* ctx) const {
  const Graph& g = model_->graph();
  const Node& node = g.nodes[n];
  const OpSchema& schema = *schemas_[n];
  ctx->node = &node;
  ctx->where = g.describe_node(n);
  ctx->opset = g.opset;
  ctx->inputs.assign(node.inputs.size(), TensorInfo{});
  ctx->input_names.assign(node.inputs.size(), std::string());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int id = node.inputs[i];
    if (id < 0) continue;
    const PlannedValue& pv = values[static_cast<size_t>(id)];
    TensorInfo& ti = ctx->inputs[i];
    ti.present = true;
    ti.dtype = pv.dtype;
    ti.shape = pv.shape;
    ti.value = pv.where == PlannedValue::Where::kConstant ? pv.constant : nullptr;
    ctx->input_names[i] = g.value_name(id);
  }
  ctx->outputs.assign(node.outputs.size(), TensorInfo{});
  for (size_t i = 0; i < node.outputs.size(); ++i) ctx->outputs[i].present = node.outputs[i] >= 0;
  for (int vi : schema.value_inputs) {
    size_t i = static_cast<size_t>(vi);
    if (ctx->has_input(i) && !ctx->inputs[i].value) {
      return unsupported(ctx->where, ": input ", i, " '", ctx->input_names[i],
                         "' decides the output shape but is computed from data at run time "
                         "(data-dependent shapes are not supported yet)");
    }
  }
  TERN_RETURN_IF_ERROR(infer_node(schema, *ctx));
  for (size_t i = 0; i < ctx->outputs.size(); ++i) {
    if (ctx->outputs[i].present && ctx->outputs[i].dtype == DType::kUndefined) {
      return internal_error(ctx->where, ": shape inference left output ", i, " untyped");
    }
  }
  return Status::ok();
}

Status Session::evaluate_now(const OpContext& ctx, std::vector<Tensor>* outputs) const {
  Status last = unsupported(ctx.where, ": no backend can evaluate it");
  for (Backend* b : config_.backends) {
    if (!b->is_host()) continue;
    auto kernel = b->prepare(ctx);
    if (!kernel) {
      last = kernel.status().with_prefix(ctx.where);
      if (last.code() != Code::kUnsupported) return last;
      continue;
    }
    KernelArgs args;
    for (const TensorInfo& in : ctx.inputs) args.inputs.push_back(in.present ? in.value : nullptr);
    outputs->assign(ctx.outputs.size(), Tensor());
    for (size_t i = 0; i < ctx.outputs.size(); ++i) {
      if (!ctx.outputs[i].present) {  // an omitted optional output: nothing to compute
        args.outputs.push_back(nullptr);
        continue;
      }
      TERN_ASSIGN_OR_RETURN((*outputs)[i],
                            Tensor::allocate(ctx.outputs[i].dtype, ctx.outputs[i].shape));
      args.outputs.push_back(&(*outputs)[i]);
    }
    b->set_num_threads(config_.num_threads);
    ExecContext exec{config_.num_threads};
    return (*kernel)->run(args, exec).with_prefix(ctx.where);
  }
  return last;
}

Status Session::fold_constants() {
  const Graph& g = model_->graph();
  folded_.resize(g.values.size());
  node_folded_.assign(g.nodes.size(), false);
  std::vector<PlannedValue> values(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) {
      values[v].where = PlannedValue::Where::kConstant;
      values[v].constant = &*g.values[v].constant;
      values[v].dtype = values[v].constant->dtype();
      values[v].shape = values[v].constant->shape();
    }
  }
  for (size_t n : order_) {
    const Node& node = g.nodes[n];
    bool foldable = !node.inputs.empty();
    for (int id : node.inputs) {
      if (id >= 0 && values[static_cast<size_t>(id)].where != PlannedValue::Where::kConstant) {
        foldable = false;
      }
    }
    if (!foldable) continue;
    OpContext ctx;
    TERN_RETURN_IF_ERROR(make_context(n, values, &ctx));
    std::vector<Tensor> outs;
    TERN_RETURN_IF_ERROR(evaluate_now(ctx, &outs));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int id = node.outputs[i];
      if (id < 0) continue;
      folded_[static_cast<size_t>(id)] = std::make_unique<Tensor>(std::move(outs[i]));
      PlannedValue& pv = values[static_cast<size_t>(id)];
      pv.where = PlannedValue::Where::kConstant;
      pv.constant = folded_[static_cast<size_t>(id)].get();
      pv.dtype = pv.constant->dtype();
      pv.shape = pv.constant->shape();
    }
    node_folded_[n] = true;
    ++folded_count_;
  }
  return Status::ok();
}

Expected<std::shared_ptr<const Plan>> Session::plan_for(const std::vector<Shape>& shapes) {
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = plans_.find(shapes);
    if (it != plans_.end()) return it->second;
  }
  std::vector<DType> dtypes;
  for (const IOInfo& in : model_->inputs()) dtypes.push_back(in.dtype);
  TERN_ASSIGN_OR_RETURN(auto plan, build_plan(shapes, dtypes));
  std::lock_guard<std::mutex> lock(plans_mu_);
  if (plans_.size() >= kMaxCachedPlans) plans_.erase(plans_.begin());
  plans_[shapes] = plan;
  return plan;
}

Expected<std::shared_ptr<const Plan>> Session::build_plan(const std::vector<Shape>& shapes,
                                                          const std::vector<DType>& dtypes) const {
  const Graph& g = model_->graph();
  auto plan = std::make_shared<Plan>();
  auto& values = plan->values;
  values.resize(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Tensor* c = g.values[v].constant ? &*g.values[v].constant : folded_[v].get();
    if (c) {
      values[v] = PlannedValue{PlannedValue::Where::kConstant, c->dtype(), c->shape(), c, 0, 0};
    }
  }
  for (size_t i = 0; i < model_->inputs().size(); ++i) {
    PlannedValue& pv = values[static_cast<size_t>(model_->inputs()[i].value)];
    pv = PlannedValue{PlannedValue::Where::kInput, dtypes[i], shapes[i], nullptr, i, 0};
  }
  std::vector<int> def_step(values.size(), -1), last_use(values.size(), -1);
  for (size_t n : order_) {
    if (node_folded_[n]) continue;
    OpContext ctx;
    TERN_RETURN_IF_ERROR(make_context(n, values, &ctx));
    const Node& node = g.nodes[n];
    bool all_known = std::all_of(ctx.inputs.begin(), ctx.inputs.end(),
                                 [](const TensorInfo& t) { return !t.present || t.value; });
    bool from_shapes = std::all_of(ctx.output_values.begin(), ctx.output_values.end(),
                                   [](const auto& v) { return v.has_value(); });
    if (all_known || from_shapes) {
      // Shape math (Shape -> Slice -> Concat -> Reshape): computed now, constant during runs.
      std::vector<Tensor> outs;
      if (from_shapes) {
        for (auto& v : ctx.output_values) outs.push_back(std::move(*v));
      } else {
        TERN_RETURN_IF_ERROR(evaluate_now(ctx, &outs));
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        int id = node.outputs[i];
        if (id < 0) continue;
        plan->known.push_back(std::make_unique<Tensor>(std::move(outs[i])));
        const Tensor* t = plan->known.back().get();
        values[static_cast<size_t>(id)] =
            PlannedValue{PlannedValue::Where::kConstant, t->dtype(), t->shape(), t, 0, 0};
      }
      continue;
    }
    PlanStep step;
    std::string reasons;
    for (Backend* b : config_.backends) {
      auto kernel = b->prepare(ctx);
      if (kernel) {
        step.backend = b;
        step.kernel = std::move(kernel).value();
        break;
      }
      if (kernel.status().code() != Code::kUnsupported) {
        return kernel.status().with_prefix(ctx.where);
      }
      reasons += (reasons.empty() ? "" : "; ") + kernel.status().message();
    }
    if (!step.kernel) return unsupported(ctx.where, ": ", reasons);
    int s = static_cast<int>(plan->steps.size());
    step.node = n;
    step.inputs = node.inputs;
    step.outputs = node.outputs;
    for (int id : node.inputs) {
      if (id >= 0) last_use[static_cast<size_t>(id)] = s;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int id = node.outputs[i];
      if (id < 0) continue;
      values[static_cast<size_t>(id)] = PlannedValue{
          PlannedValue::Where::kArena, ctx.outputs[i].dtype, ctx.outputs[i].shape, nullptr, 0, 0};
      def_step[static_cast<size_t>(id)] = s;
    }
    plan->steps.push_back(std::move(step));
  }
  for (int id : g.outputs) {
    PlannedValue& pv = values[static_cast<size_t>(id)];
    if (pv.where == PlannedValue::Where::kArena) pv.where = PlannedValue::Where::kOutput;
  }
  std::vector<BufferRequest> requests;
  std::vector<size_t> request_value;
  for (size_t v = 0; v < values.size(); ++v) {
    if (values[v].where != PlannedValue::Where::kArena) continue;
    TERN_ASSIGN_OR_RETURN(int64_t n, checked_numel(values[v].shape));
    requests.push_back(BufferRequest{static_cast<size_t>(n) * dtype_size(values[v].dtype),
                                     def_step[v], std::max(def_step[v], last_use[v])});
    request_value.push_back(v);
  }
  MemoryPlan mp = plan_memory(requests);
  for (size_t r = 0; r < requests.size(); ++r) values[request_value[r]].offset = mp.offsets[r];
  plan->arena_bytes = mp.arena_bytes;
  plan->naive_bytes = mp.naive_bytes;
  return std::shared_ptr<const Plan>(std::move(plan));
}

Status Session::check_inputs(const std::vector<std::string>& names,
                             const std::vector<const Tensor*>& ins,
                             std::vector<const Tensor*>* ordered) const {
  const auto& infos = model_->inputs();
  ordered->assign(infos.size(), nullptr);
  for (size_t k = 0; k < names.size(); ++k) {
    auto it = std::find_if(infos.begin(), infos.end(),
                           [&](const IOInfo& i) { return i.name == names[k]; });
    if (it == infos.end()) {
      std::string known;
      for (const auto& i : infos) known += (known.empty() ? "'" : ", '") + i.name + "'";
      return invalid_argument("unknown input name '", names[k], "' (the model's inputs: ", known,
                              ")");
    }
    size_t idx = static_cast<size_t>(it - infos.begin());
    if ((*ordered)[idx]) return invalid_argument("input '", names[k], "' is given twice");
    const Tensor* t = ins[k];
    if (t->dtype() != it->dtype) {
      return invalid_argument("input '", it->name, "' must be ", dtype_name(it->dtype), ", got ",
                              dtype_name(t->dtype()));
    }
    if (it->has_shape) {
      bool ok = t->rank() == it->dims.size();
      for (size_t d = 0; ok && d < it->dims.size(); ++d) {
        ok = it->dims[d] < 0 || it->dims[d] == t->shape()[d];
      }
      if (!ok) {
        return invalid_argument("input '", it->name, "' must have shape ", dims_str(*it), ", got ",
                                shape_str(t->shape()));
      }
    }
    (*ordered)[idx] = t;
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!(*ordered)[i]) return invalid_argument("input '", infos[i].name, "' is not given");
  }
  return Status::ok();
}

Status Session::run(const std::vector<std::string>& input_names,
                    const std::vector<const Tensor*>& inputs,
                    const std::vector<std::string>& output_names, std::vector<Tensor>* outputs) {
  std::vector<const Tensor*> ordered;
  TERN_RETURN_IF_ERROR(check_inputs(input_names, inputs, &ordered));
  const Graph& g = model_->graph();
  std::vector<int> wanted;
  for (const std::string& name : output_names) {
    auto it = std::find_if(g.outputs.begin(), g.outputs.end(),
                           [&](int id) { return g.value_name(id) == name; });
    if (it == g.outputs.end()) return invalid_argument("unknown output name '", name, "'");
    wanted.push_back(*it);
  }
  std::vector<Shape> shapes;
  for (const Tensor* t : ordered) shapes.push_back(t->shape());
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, plan_for(shapes));

  // The arena goes back to the plan's pool on every exit path.
  struct ArenaLease {
    const Plan& plan;
    std::shared_ptr<void> arena;
    ~ArenaLease() {
      if (arena) plan.release_arena(std::move(arena));
    }
  } lease{*plan, plan->acquire_arena()};
  if (!lease.arena) {
    return out_of_memory("cannot allocate the ", plan->arena_bytes, "-byte run arena");
  }
  auto* base = static_cast<uint8_t*>(lease.arena.get());
  std::vector<Tensor> tensors(plan->values.size());
  for (size_t v = 0; v < plan->values.size(); ++v) {
    const PlannedValue& pv = plan->values[v];
    switch (pv.where) {
      case PlannedValue::Where::kNone:
        break;
      case PlannedValue::Where::kConstant:
        tensors[v] = *pv.constant;
        break;
      case PlannedValue::Where::kInput:
        tensors[v] = *ordered[pv.input_index];
        break;
      case PlannedValue::Where::kArena:
        tensors[v] = Tensor::wrap(pv.dtype, pv.shape, base + pv.offset, nullptr);
        break;
      case PlannedValue::Where::kOutput: {
        auto t = Tensor::allocate(pv.dtype, pv.shape);
        if (!t) {
          return t.status().with_prefix(
              str_cat("output '", g.value_name(static_cast<int>(v)), "'"));
        }
        tensors[v] = std::move(*t);
        break;
      }
    }
  }
  ExecContext exec{config_.num_threads};
  for (Backend* b : config_.backends) b->set_num_threads(config_.num_threads);
  KernelArgs args;
  for (const PlanStep& step : plan->steps) {
    args.inputs.clear();
    args.outputs.clear();
    for (int id : step.inputs) args.inputs.push_back(id < 0 ? nullptr : &tensors[id]);
    for (int id : step.outputs) args.outputs.push_back(id < 0 ? nullptr : &tensors[id]);
    Status st = step.kernel->run(args, exec);
    if (!st.is_ok()) {
      return st.with_prefix(str_cat(g.describe_node(step.node), " [", step.backend->name(), "/",
                                    step.kernel->name(), "]"));
    }
  }
  std::vector<Tensor> result;
  std::set<int> moved;
  for (int id : wanted) {
    const PlannedValue& pv = plan->values[static_cast<size_t>(id)];
    if (pv.where == PlannedValue::Where::kOutput && moved.insert(id).second) {
      result.push_back(tensors[static_cast<size_t>(id)]);
      continue;
    }
    TERN_ASSIGN_OR_RETURN(Tensor copy, tensors[static_cast<size_t>(id)].clone());
    result.push_back(std::move(copy));
  }
  *outputs = std::move(result);
  return Status::ok();
}

}  // namespace tern
