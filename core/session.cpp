#include "core/session.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <set>

#include "core/graph_optimizer.h"
#include "core/memory_plan.h"
#include "core/thread_pool.h"

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

// The flags that decide kernel choice or graph rewriting: plans are cached per their values.
Shape plan_flag_key(const FlagValues& f) {
  // num_threads: oneDNN fixes a primitive's work split for the thread count it was made with.
  return {f[FlagId::kNumThreads], f[FlagId::kCpuMaxCapability], f[FlagId::kDeterministicAlgorithms],
          f[FlagId::kOptEinsumEnabled], f[FlagId::kOptEinsumStrategy],
          f[FlagId::kSdpMath],          f[FlagId::kSdpFlash],
          f[FlagId::kMhaFastpath],      f[FlagId::kSdpMemEfficient],
          f[FlagId::kSdpCudnn],         f[FlagId::kCudaAllowTf32],
          f[FlagId::kCudaAllowFp16Reduced], f[FlagId::kCudaAllowBf16Reduced],
          f[FlagId::kCudaBlasLibrary],  f[FlagId::kCudnnEnabled],
          f[FlagId::kCudnnAllowTf32],   f[FlagId::kCudnnDeterministic],
          f[FlagId::kCudnnBenchmark], f[FlagId::kCudnnBenchmarkLimit], f[FlagId::kVulkanAllowFp16],
          f[FlagId::kVulkanFp16Arithmetic], f[FlagId::kVulkanConvAlgorithm]};
}

}  // namespace

std::shared_ptr<void> Plan::acquire_arena(int layout) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& pool = free_arenas_[layout];
    if (!pool.empty()) {
      auto a = std::move(pool.back());
      pool.pop_back();
      return a;
    }
  }
  return aligned_buffer(layouts[layout].bytes);
}

void Plan::release_arena(int layout, std::shared_ptr<void> arena) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_arenas_[layout].push_back(std::move(arena));
}

Expected<std::shared_ptr<void>> Plan::acquire_device_arena() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_device_arenas_.empty()) {
      auto a = std::move(free_device_arenas_.back());
      free_device_arenas_.pop_back();
      return a;
    }
  }
  return device_backend->allocate(device_layout.bytes);
}

void Plan::release_device_arena(std::shared_ptr<void> arena) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_device_arenas_.push_back(std::move(arena));
}

std::shared_ptr<void> Plan::find_capture(size_t first_step, const std::vector<void*>& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = captures_.find({first_step, key});
  return it == captures_.end() ? nullptr : it->second;
}

void Plan::store_capture(size_t first_step, std::vector<void*> key,
                         std::shared_ptr<void> c) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Each arena (and each set of bound device inputs) has its own capture; a few per segment are
  // kept, the oldest dropped past that.
  constexpr size_t kPerSegment = 8;
  size_t n = 0;
  for (auto it = captures_.begin(); it != captures_.end();) {
    if (it->first.first == first_step && ++n >= kPerSegment) {
      it = captures_.erase(it);
    } else {
      ++it;
    }
  }
  captures_[{first_step, std::move(key)}] = std::move(c);
}

bool Plan::capture_failed(size_t first_step) const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_captures_.count(first_step) != 0;
}

void Plan::mark_capture_failed(size_t first_step) const {
  std::lock_guard<std::mutex> lock(mu_);
  failed_captures_.insert(first_step);
}

namespace {

// An allocation the session's memory limit refused says so.
Status with_budget_note(Status st, const MemoryBudget* budget) {
  if (st.is_ok() || st.code() != Code::kOutOfMemory || !budget || budget->refusals() == 0) {
    return st;
  }
  return out_of_memory(st.message(), " (the session's max_memory_bytes limit is ",
                       budget->limit(), " bytes; ", budget->used(), " in use)");
}

}  // namespace

Expected<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model,
                                                   SessionConfig config) {
  std::shared_ptr<MemoryBudget> budget;
  if (config.max_memory_bytes) budget = std::make_shared<MemoryBudget>(config.max_memory_bytes);
  BudgetScope scope(budget);
  auto s = create_charged(std::move(model), std::move(config));
  if (!s) return with_budget_note(s.status(), budget.get());
  (*s)->budget_ = std::move(budget);
  return s;
}

Status Session::run(const std::vector<std::string>& input_names,
                    const std::vector<const Tensor*>& inputs,
                    const std::vector<std::string>& output_names, std::vector<Tensor>* outputs,
                    const FlagOverrides* run_flags, const Device* output_device) {
  BudgetScope scope(budget_);
  const Device to = output_device ? *output_device : Device{};
  if (!to.is_host() && !backend_for(to)) {
    return invalid_argument("outputs on ", to.name(), ": the session has no backend there");
  }
  return with_budget_note(run_charged(input_names, inputs, output_names, outputs, run_flags, to),
                          budget_.get());
}

Expected<std::unique_ptr<Session>> Session::create_charged(std::shared_ptr<const Model> model,
                                                           SessionConfig config) {
  if (config.backends.empty()) return invalid_argument("no backend given");
  const auto t0 = Profiler::Clock::now();
  std::unique_ptr<Session> s(new Session());
  if (!config.profile_path.empty()) s->profiler_ = std::make_unique<Profiler>(config.profile_path);
  s->model_ = std::move(model);
  s->config_ = std::move(config);
  s->graph_ = s->model_->graph();  // the session's own copy, which the optimizer rewrites
  const Graph& g = s->graph_;
  TERN_RETURN_IF_ERROR(s->check_ops());
  TERN_RETURN_IF_ERROR(s->fold_constants());
  TERN_RETURN_IF_ERROR(optimize_graph(s->graph_, &s->optimizer_report_));
  TERN_RETURN_IF_ERROR(s->check_ops());  // fused nodes have schemas and kernels too
  std::vector<bool> constant(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) constant[v] = g.values[v].constant.has_value();
  s->patterns_ = find_attention_patterns(g, constant);
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
  if (s->profiler_) {
    ProfileEvent e{"session_create", "session", s->profiler_->since_start_us(t0), 0,
                   Profiler::thread_number(), {}};
    e.dur_us = s->profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
    const OptimizerReport& r = s->optimizer_report_;
    e.args = {{"nodes", std::to_string(g.nodes.size())},
              {"folded_constants", std::to_string(s->folded_count_)},
              {"batch_norms_folded", std::to_string(r.batch_norms_folded)},
              {"hardswish_fused", std::to_string(r.hardswish_fused)},
              {"activations_fused", std::to_string(r.activations_fused)},
              {"dead_nodes_removed", std::to_string(r.dead_nodes_removed)}};
    s->profiler_->record(std::move(e));
  }
  return s;
}

size_t Session::optimized_graph(Graph* out) const {
  *out = graph_;
  Graph& g = *out;
  size_t attached = 0;
  std::lock_guard<std::mutex> lock(plans_mu_);
  for (const auto& entry : plans_) {
    for (const PlanStep& step : entry.second->steps) {
      for (Kernel::PackedWeight& w : step.kernel->packed_weights()) {
        const int id = w.input < step.inputs.size() ? step.inputs[w.input] : -1;
        // Only the graph's own constants: a weight computed while planning is not in the file.
        if (id < 0 || static_cast<size_t>(id) >= g.values.size()) continue;
        Value& v = g.values[static_cast<size_t>(id)];
        if (!v.constant) continue;
        const Tensor& d = w.packed.data;
        const bool known = std::any_of(v.packed.begin(), v.packed.end(), [&](const PackedData& p) {
          return p.key == w.packed.key && p.data.byte_size() == d.byte_size() &&
                 std::memcmp(p.data.raw(), d.raw(), d.byte_size()) == 0;
        });
        if (known) continue;
        v.packed.push_back(std::move(w.packed));
      }
    }
  }
  for (const Value& v : g.values) attached += v.packed.size();
  return attached;
}

Status Session::check_ops() {
  const Graph& g = graph_;
  TERN_ASSIGN_OR_RETURN(order_, g.topological_order());
  schemas_.assign(g.nodes.size(), nullptr);
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
    std::vector<bool> present;
    for (int id : node.inputs) present.push_back(id >= 0);
    // Before any rewrite reads a node's inputs by position.
    TERN_RETURN_IF_ERROR(check_arity(*schema, present, node.outputs.size(), g.describe_node(n)));
    bool any = std::any_of(config_.backends.begin(), config_.backends.end(),
                           [&](Backend* b) { return b->supports_op(node.op_type); });
    if (!any) {
      return unsupported(g.describe_node(n), ": no selected backend implements ", node.op_type);
    }
    schemas_[n] = schema;
  }
  return Status::ok();
}

FlagValues Session::flags(const FlagOverrides* run_flags) const {
  return Flags::global().resolve(&config_.overrides, run_flags);
}

Status Session::make_context(size_t n, const std::vector<PlannedValue>& values,
                             OpContext* ctx) const {
  const Graph& g = graph_;
  return make_context(g.nodes[n], g.describe_node(n), values, ctx);
}

Status Session::make_context(const Node& node, const std::string& where,
                             const std::vector<PlannedValue>& values, OpContext* ctx) const {
  const Graph& g = graph_;
  const OpSchema* schema = OpRegistry::global().find(node.op_type);
  if (!schema) return internal_error(where, ": no schema for ", node.op_type);
  ctx->node = &node;
  ctx->where = where;
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
    if (ti.value && static_cast<size_t>(id) < g.values.size()) {
      const Value& gv = g.values[static_cast<size_t>(id)];
      if (!gv.packed.empty() && gv.constant && &*gv.constant == ti.value) ti.packed = &gv.packed;
    }
    ctx->input_names[i] = g.value_name(id);
  }
  ctx->outputs.assign(node.outputs.size(), TensorInfo{});
  for (size_t i = 0; i < node.outputs.size(); ++i) ctx->outputs[i].present = node.outputs[i] >= 0;
  for (int vi : schema->value_inputs) {
    size_t i = static_cast<size_t>(vi);
    if (ctx->has_input(i) && !ctx->inputs[i].value) {
      ctx->needs_values = true;
      return unsupported(ctx->where, ": input ", i, " '", ctx->input_names[i],
                         "' decides the output shape but is computed from data at run time "
                         "(data-dependent shapes are not supported yet)");
    }
  }
  TERN_RETURN_IF_ERROR(infer_node(*schema, *ctx));
  for (size_t i = 0; i < ctx->outputs.size(); ++i) {
    if (ctx->outputs[i].present && ctx->outputs[i].dtype == DType::kUndefined) {
      return internal_error(ctx->where, ": shape inference left output ", i, " untyped");
    }
  }
  return Status::ok();
}

Status Session::evaluate_now(const OpContext& ctx, std::vector<Tensor>* outputs,
                             const FlagValues* run_flags) const {
  Status last = unsupported(ctx.where, ": no backend can evaluate it");
  const FlagValues f = run_flags ? *run_flags : flags();
  const int threads = static_cast<int>(f[FlagId::kNumThreads]);
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
    std::shared_ptr<void> workspace;
    if (size_t ws = (*kernel)->workspace_bytes()) {
      workspace = aligned_buffer(ws);
      if (!workspace) return out_of_memory(ctx.where, ": workspace of ", ws, " bytes");
      args.workspace = workspace.get();
    }
    b->set_num_threads(threads);
    ExecContext exec{threads, f.on(FlagId::kDeterministicAlgorithms)};
    return (*kernel)->run(args, exec).with_prefix(ctx.where);
  }
  return last;
}

Status Session::fold_constants() {
  Graph& g = graph_;
  std::vector<PlannedValue> values(g.values.size());
  auto mark_constant = [&](size_t v) {
    values[v].where = PlannedValue::Where::kConstant;
    values[v].constant = &*g.values[v].constant;
    values[v].dtype = values[v].constant->dtype();
    values[v].shape = values[v].constant->shape();
  };
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) mark_constant(v);
  }
  // Random ops give new values every run, so they are never folded.
  static const std::set<std::string> kRandom = {"RandomNormal", "RandomUniform",
                                                "RandomNormalLike", "RandomUniformLike",
                                                "Bernoulli", "Multinomial", "Dropout"};
  std::vector<bool> folded(g.nodes.size(), false);
  for (size_t n : order_) {
    const Node& node = g.nodes[n];
    bool foldable = (!node.inputs.empty() || node.op_type == "Constant") &&
                    !kRandom.count(node.op_type) &&
                    std::none_of(node.outputs.begin(), node.outputs.end(), [&](int id) {
                      return id >= 0 && std::find(g.inputs.begin(), g.inputs.end(), id) !=
                                            g.inputs.end();
                    });
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
      g.values[static_cast<size_t>(id)].constant = std::move(outs[i]);
      mark_constant(static_cast<size_t>(id));
    }
    folded[n] = true;
    ++folded_count_;
  }
  erase_nodes(g, folded);
  return Status::ok();
}

Expected<std::shared_ptr<const Plan>> Session::plan_for(const std::vector<Shape>& shapes,
                                                        const FlagValues& flags) {
  std::vector<Shape> key = shapes;
  key.push_back(plan_flag_key(flags));
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      last_plan_ = it->second;
      return it->second;
    }
  }
  std::vector<DType> dtypes;
  for (const IOInfo& in : model_->inputs()) dtypes.push_back(in.dtype);
  // oneDNN sizes a primitive's work split by the thread count current when it is created: the
  // kernels must be made under the threads their runs use.
  for (Backend* b : config_.backends) {
    b->set_num_threads(static_cast<int>(flags[FlagId::kNumThreads]));
  }
  TERN_ASSIGN_OR_RETURN(auto plan, build_plan(shapes, dtypes, flags));
  std::lock_guard<std::mutex> lock(plans_mu_);
  if (plans_.size() >= kMaxCachedPlans) plans_.erase(plans_.begin());
  plans_[key] = plan;
  last_plan_ = plan;
  return plan;
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

Status Session::run_charged(const std::vector<std::string>& input_names,
                            const std::vector<const Tensor*>& inputs,
                            const std::vector<std::string>& output_names,
                            std::vector<Tensor>* outputs, const FlagOverrides* run_flags,
                            const Device& output_device) {
  std::vector<const Tensor*> ordered;
  TERN_RETURN_IF_ERROR(check_inputs(input_names, inputs, &ordered));
  const Graph& g = graph_;
  std::vector<int> wanted;
  for (const std::string& name : output_names) {
    auto it = std::find_if(g.outputs.begin(), g.outputs.end(),
                           [&](int id) { return g.value_name(id) == name; });
    if (it == g.outputs.end()) return invalid_argument("unknown output name '", name, "'");
    wanted.push_back(*it);
  }
  const FlagValues f = flags(run_flags);
  std::vector<Shape> shapes;
  for (const Tensor* t : ordered) shapes.push_back(t->shape());
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, plan_for(shapes, f));
  // Device inputs that host kernels read (or that the plan's device cannot use) are staged to
  // host memory; the others are passed to the device kernels as they are.
  std::vector<Tensor> staged;
  staged.reserve(ordered.size());
  for (size_t i = 0; i < ordered.size(); ++i) {
    const Tensor& t = *ordered[i];
    if (t.on_host()) continue;
    const bool device_only = !plan->dynamic && plan->device_backend &&
                             plan->device_backend->device() == t.device() &&
                             !plan->input_read_on_host[i];
    if (device_only) continue;
    auto host = moved_to(t, Device{});
    if (!host) {
      return host.status().with_prefix(str_cat("input '", model_->inputs()[i].name, "'"));
    }
    staged.push_back(std::move(*host));
    ordered[i] = &staged.back();
  }
  auto finish_outputs = [&](std::vector<Tensor>* outs) -> Status {
    for (Tensor& t : *outs) {
      if (t.device() != output_device) {
        TERN_ASSIGN_OR_RETURN(t, moved_to(t, output_device));
      }
    }
    return Status::ok();
  };
  // The backends this run uses: the host ones and the plan's device (dynamic runs compute on the
  // host). Only they get begin_run/end_run, so a listed device the plan does not use cannot change
  // the calling thread's state (a CUDA backend makes its device current until end_run).
  std::vector<Backend*> used;
  for (Backend* b : config_.backends) {
    if (b->is_host() || (!plan->dynamic && b == plan->device_backend)) used.push_back(b);
  }
  if (plan->dynamic) {
    for (Backend* b : used) b->begin_run(f);
    Status st = run_dynamic(ordered, wanted, f, outputs);
    for (Backend* b : used) b->end_run(f);
    TERN_RETURN_IF_ERROR(st);
    return finish_outputs(outputs);
  }
  const int threads = static_cast<int>(f[FlagId::kNumThreads]);
  const int interop = static_cast<int>(f[FlagId::kNumInteropThreads]);
  const bool concurrent = runs_concurrently(*plan, threads, interop);
  const int layout = concurrent ? 1 : 0;

  // The arena goes back to the plan's pool on every exit path.
  struct ArenaLease {
    const Plan& plan;
    int layout;
    std::shared_ptr<void> arena;
    ~ArenaLease() {
      if (arena) plan.release_arena(layout, std::move(arena));
    }
  } lease{*plan, layout, plan->acquire_arena(layout)};
  if (!lease.arena) {
    return out_of_memory("cannot allocate the ", plan->layouts[layout].bytes, "-byte run arena");
  }
  auto* base = static_cast<uint8_t*>(lease.arena.get());
  struct DeviceArenaLease {
    const Plan& plan;
    std::shared_ptr<void> arena;
    ~DeviceArenaLease() {
      if (arena) plan.release_device_arena(std::move(arena));
    }
  } device_lease{*plan, nullptr};
  uint8_t* device_base = nullptr;
  if (plan->device_backend) {
    auto a = plan->acquire_device_arena();
    if (!a) {
      return a.status().with_prefix(
          str_cat("the ", plan->device_layout.bytes, "-byte device arena"));
    }
    device_lease.arena = std::move(*a);
    device_base = static_cast<uint8_t*>(device_lease.arena.get());
  }
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
        tensors[v] = pv.device.is_host()
                         ? Tensor::wrap(pv.dtype, pv.shape,
                                        base + plan->layouts[layout].value_offset[v], nullptr)
                         : Tensor::wrap(pv.dtype, pv.shape,
                                        device_base + plan->device_layout.value_offset[v],
                                        nullptr, pv.device);
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
  for (Backend* b : used) b->begin_run(f);
  const bool det = f.on(FlagId::kDeterministicAlgorithms);
  const auto t0 = profiler_ ? Profiler::Clock::now() : Profiler::Clock::time_point();
  Status st = concurrent ? execute_concurrent(*plan, tensors, base, threads, interop, det)
                         : execute_sequential(*plan, tensors, base, device_base, threads, det,
                                              f.on(FlagId::kCudaGraphs));
  if (plan->device_backend) {
    // The device arena goes back to the pool (and host buffers read by queued copies may go
    // away) only once the device is done with them.
    Status sync = plan->device_backend->synchronize();
    if (st.is_ok()) st = sync;
  }
  for (Backend* b : used) b->end_run(f);
  if (st.is_ok()) plan->set_ran_eagerly();
  if (profiler_) {
    ProfileEvent e{"run", "run", profiler_->since_start_us(t0), 0, Profiler::thread_number(), {}};
    e.dur_us = profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
    e.args = {{"steps", std::to_string(plan->steps.size())},
              {"threads", std::to_string(threads)},
              {"interop", std::to_string(concurrent ? interop : 1)},
              {"arena_bytes", std::to_string(plan->layouts[layout].bytes)}};
    profiler_->record(std::move(e));
  }
  TERN_RETURN_IF_ERROR(st);
  std::vector<Tensor> result;
  std::set<int> moved;
  for (int id : wanted) {
    const PlannedValue& pv = plan->values[static_cast<size_t>(id)];
    if (pv.where == PlannedValue::Where::kOutput && moved.insert(id).second) {
      result.push_back(tensors[static_cast<size_t>(id)]);
      continue;
    }
    const Tensor& t = tensors[static_cast<size_t>(id)];
    if (t.on_host()) {
      TERN_ASSIGN_OR_RETURN(Tensor copy, t.clone());
      result.push_back(std::move(copy));
    } else {  // in the device arena (or a bound input): copied out before the arena is reused
      if (t.device() != output_device) {
        TERN_ASSIGN_OR_RETURN(Tensor copy, moved_to(t, Device{}));
        result.push_back(std::move(copy));
        continue;
      }
      Backend* dev = plan->device_backend;
      TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, dev->allocate(t.byte_size()));
      void* raw = mem.get();
      Tensor copy = Tensor::wrap(t.dtype(), t.shape(), raw, std::move(mem), t.device());
      TERN_RETURN_IF_ERROR(dev->copy_on_device(t, copy));
      result.push_back(std::move(copy));
    }
  }
  TERN_RETURN_IF_ERROR(finish_outputs(&result));
  if (plan->device_backend) TERN_RETURN_IF_ERROR(plan->device_backend->synchronize());
  *outputs = std::move(result);
  return Status::ok();
}

}  // namespace tern
