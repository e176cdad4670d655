#include "core/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>

#include "core/op_registry.h"
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"
#include "core/plan/static_prefix.h"
#include "core/run_homes.h"
#include "core/thread_budget.h"
#include "core/transfer.h"

namespace tern {

namespace {

// CPU time the calling thread has had, in milliseconds.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace

namespace {

std::string dims_str(const IOInfo& info) {
  std::string s = "[";
  for (size_t i = 0; i < info.dims.size(); ++i) {
    if (i) s += ",";
    s += info.dims[i] < 0 ? "?" : std::to_string(info.dims[i]);
  }
  return s + "]";
}

// An allocation the session's memory limit refused says so.
Status with_budget_note(Status st, const MemoryBudget* budget) {
  if (st.is_ok() || st.code() != Code::kOutOfMemory || !budget || budget->refusals() == 0) {
    return st;
  }
  return out_of_memory(st.message(), " (the session's max_memory_bytes limit is ", budget->limit(),
                       " bytes; ", budget->used(), " in use)");
}

// A sequence or optional input against the model's declaration: element dtypes.
Status check_composite(const IOInfo& info, const Tensor& t) {
  auto dtype_ok = [](DType want, DType got) {
    return want == DType::kUndefined || got == DType::kUndefined || want == got;
  };
  if (const SequenceData* s = t.as_sequence()) {
    for (const Tensor& item : s->items) {
      if (!dtype_ok(info.elem, item.dtype())) {
        return invalid_argument("input '", info.name, "' must be a sequence of ",
                                dtype_name(info.elem), ", an element is ",
                                dtype_name(item.dtype()));
      }
    }
    return Status::ok();
  }
  const OptionalData* o = t.as_optional();
  if (o && o->value && !dtype_ok(info.elem, o->value->dtype())) {
    return invalid_argument("input '", info.name, "' must be an optional ", dtype_name(info.elem),
                            ", it holds a ", dtype_name(o->value->dtype()));
  }
  return Status::ok();
}

// Whether every input of the model has a fixed shape (a model of several shapes plans for each).
bool static_inputs(const Model& m) {
  for (const IOInfo& in : m.inputs()) {
    if (!in.has_shape) return false;
    for (int64_t d : in.dims) {
      if (d < 0) return false;
    }
  }
  return true;
}

// The values `plan` computed while planning (shape arithmetic, and what follows from it and the
// constants) become constants of `g`, and the nodes that computed them go with what only they
// read: for a model of fixed input shapes they are the same at every run, so a session made from
// the saved graph does not compute them again (~500 small nodes in a Swin transformer, 1.5 ms of
// its session). Graph outputs stay computed, and values over 1 MB are left out of the file.
void keep_planned_values(Graph& g, const Plan& plan) {
  constexpr size_t kMaxBytes = size_t{1} << 20;
  const std::vector<bool> is_output = graph_output_mask(g);
  const size_t count = std::min(g.values.size(), plan.values.size());
  // Value id's data from the plan, when it can go into the file.
  auto planned = [&](int id) -> const Tensor* {
    if (id < 0 || static_cast<size_t>(id) >= count) return nullptr;
    const PlannedValue& pv = plan.values[static_cast<size_t>(id)];
    if (pv.where != PlannedValue::Where::kConstant || !pv.constant ||
        g.values[static_cast<size_t>(id)].constant || is_output[static_cast<size_t>(id)]) {
      return nullptr;
    }
    const Tensor& t = *pv.constant;
    const bool plain = t.dtype() != DType::kString && !dtype_is_composite(t.dtype()) &&
                       dtype_size(t.dtype()) != 0 && t.byte_size() <= kMaxBytes;
    return plain ? &t : nullptr;
  };
  // A node goes, its outputs becoming constants, only when every output it has can: a value is
  // never both a constant and a node's output.
  std::vector<bool> computed(g.nodes.size(), false);
  std::vector<std::pair<int, ValueType>> kept;  // (value, its type before)
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    bool all = !random_op(node.op_type);
    bool any = false;
    for (int id : node.outputs) {
      if (id < 0) continue;
      any = true;
      all = all && planned(id) != nullptr;
    }
    if (!any || !all) continue;
    computed[k] = true;
    for (int id : node.outputs) {
      if (id < 0) continue;
      const Tensor& t = *planned(id);
      Value& v = g.values[static_cast<size_t>(id)];
      kept.emplace_back(id, v.type);
      v.constant = t;
      v.type.dtype = t.dtype();
      v.type.has_shape = true;
      v.type.dims.clear();
      for (int64_t d : t.shape()) v.type.dims.push_back(Dim{d, {}});
    }
  }
  erase_nodes(g, computed);
  OptimizerReport unused;
  (void)remove_dead_nodes(g, &unused);  // (it cannot fail)
  // What only removed nodes read (the steps between a Shape and a Reshape) holds no data.
  const ValueConsumers readers = value_consumers(g);
  for (auto& [id, type] : kept) {
    if (!readers[static_cast<size_t>(id)].empty()) continue;
    g.values[static_cast<size_t>(id)].constant.reset();
    g.values[static_cast<size_t>(id)].type = std::move(type);
  }
}

// Whether every backend of a session is the CPU's.
bool only_cpu(const std::vector<Backend*>& backends) {
  return std::all_of(backends.begin(), backends.end(),
                     [](const Backend* b) { return std::string(b->name()) == "cpu"; });
}

}  // namespace

Expected<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model,
                                                   SessionConfig config) {
  std::shared_ptr<MemoryBudget> budget;
  if (config.max_memory_bytes) budget = std::make_shared<MemoryBudget>(config.max_memory_bytes);
  BudgetScope scope(budget);
  std::optional<Expected<std::unique_ptr<Session>>> made;
  auto make = [&] { made.emplace(create_charged(std::move(model), std::move(config))); };
#if defined(TERN_HAVE_OPENMP)
  // A CPU session's creation may start parallel regions (folding large constants; weight
  // reorders run on one thread): on a run home, as its runs will, so that the calling thread gets
  // no OpenMP team of its own (core/run_homes.h).
  if (only_cpu(config.backends) && Flags::global().get(FlagId::kCpuRunHomes) != 0) {
    TERN_RETURN_IF_ERROR(RunHomes::global().run([&] {
      make();
      return Status::ok();
    }));
  }
#endif
  if (!made) make();
  Expected<std::unique_ptr<Session>>& s = *made;
  if (!s) return with_budget_note(s.status(), budget.get());
  (*s)->budget_ = std::move(budget);
  return std::move(s);
}

Status Session::run(const std::vector<std::string>& input_names,
                    const std::vector<const Tensor*>& inputs,
                    const std::vector<std::string>& output_names, std::vector<Tensor>* outputs,
                    const FlagOverrides* run_flags, const Device* output_device,
                    const RunControl* control) {
  // Options cancelled before the run (cancel is sticky) stop it before any work.
  TERN_RETURN_IF_ERROR(check_run(control, "planning"));
  BudgetScope scope(budget_);
  const Device to = output_device ? *output_device : Device{};
  if (!to.is_host() && !backend_for(config_.backends, to)) {
    return invalid_argument("outputs on ", to.name(), ": the session has no backend there");
  }
  return with_budget_note(
      run_charged(input_names, inputs, output_names, outputs, run_flags, to, control),
      budget_.get());
}

Expected<std::unique_ptr<Session>> Session::create_charged(std::shared_ptr<const Model> model,
                                                           SessionConfig config,
                                                           std::shared_ptr<Profiler> profiler) {
  if (config.backends.empty()) return invalid_argument("no backend given");
  const auto t0 = Profiler::Clock::now();
  std::unique_ptr<Session> s(new Session());
  s->profiler_ = std::move(profiler);
  if (!s->profiler_ && !config.profile_path.empty()) {
    s->profiler_ = std::make_shared<Profiler>(config.profile_path);
  }
  s->model_ = std::move(model);
  s->config_ = std::move(config);
  s->planning_backends_ = s->config_.backends;
  s->cpu_only_ = only_cpu(s->config_.backends);
  const auto& run_on = s->config_.backends;
  if (s->config_.planning_host &&
      std::none_of(run_on.begin(), run_on.end(), [](Backend* b) { return b->is_host(); })) {
    s->planning_backends_.push_back(s->config_.planning_host);
  }
  s->graph_ = s->model_->graph();  // the session's own copy, which the optimizer rewrites
  const Graph& g = s->graph_;
  TERN_RETURN_IF_ERROR(s->check_ops());
  // graph.optimize is decided once, here: the session keeps the value it was made with, so its
  // plans (whose key holds it) and its graph agree whatever the global value does later.
  const bool optimize = s->flags().on(FlagId::kGraphOptimize);
  s->config_.overrides.set(FlagId::kGraphOptimize, optimize ? 1 : 0);
  // cpu.float16_in_float32 likewise: the graph is widened (or not) once.
  s->config_.overrides.set(FlagId::kCpuFloat16InFloat32, s->flags()[FlagId::kCpuFloat16InFloat32]);
  if (optimize) {
    TERN_RETURN_IF_ERROR(
        optimize_graph(s->graph_, s->planning_backends_, s->flags(), &s->optimizer_report_));
  } else {
    // The nodes as imported; constants are still computed once (no activation goes away), so
    // a session whose backends lack a constant-only op still plans.
    TERN_RETURN_IF_ERROR(
        fold_constants(s->graph_, s->planning_backends_, s->flags(), &s->optimizer_report_));
    TERN_RETURN_IF_ERROR(remove_dead_nodes(s->graph_, &s->optimizer_report_));
  }
  TERN_RETURN_IF_ERROR(s->check_ops());  // fused nodes have schemas and kernels too
  std::vector<bool> constant(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) constant[v] = g.values[v].constant.has_value();
  s->patterns_ = find_attention_patterns(g, constant);
  PlannerContext pc;
  pc.graph = &s->graph_;
  pc.order = &s->order_;
  pc.inputs = &s->model_->inputs();
  pc.backends = s->config_.backends;
  pc.planning_backends = s->planning_backends_;
  pc.attention = &s->patterns_;
  pc.weights = s->weights_.get();
  pc.subgraphs = s->subgraphs_.get();
  pc.prefixes = std::make_shared<StaticPrefixes>();
  for (size_t n = 0; n < g.nodes.size(); ++n) pc.labels.push_back(g.describe_node(n));
  s->planner_ = std::make_unique<Planner>(std::move(pc));
  s->executor_ = std::make_unique<Executor>(s->graph_, s->order_, s->model_->inputs(),
                                            s->config_.backends, s->profiler_.get());
  s->executor_->set_services(s->weights_.get(), s->subgraphs_.get());
  // With static input shapes the plan is built now: shape errors show at creation, not first run.
  if (static_inputs(*s->model_)) {
    std::vector<Shape> shapes;
    for (const IOInfo& in : s->model_->inputs()) shapes.push_back(in.dims);
    TERN_RETURN_IF_ERROR(s->plan_for(shapes).status());
  }
  if (s->profiler_) {
    ProfileEvent e{"session_create",          "session", s->profiler_->since_start_us(t0), 0,
                   Profiler::thread_number(), {}};
    e.dur_us = s->profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
    const OptimizerReport& r = s->optimizer_report_;
    const std::pair<const char*, size_t> counts[] = {
        {"nodes", g.nodes.size()},
        {"folded_constants", r.constants_folded},
        {"batch_norms_folded", r.batch_norms_folded},
        {"hardswish_fused", r.hardswish_fused},
        {"swish_fused", r.swish_fused},
        {"layer_norms_fused", r.layer_norms_fused},
        {"group_norms_fused", r.group_norms_fused},
        {"activations_fused", r.activations_fused},
        {"dead_nodes_removed", r.dead_nodes_removed},
        {"pads_folded", r.pads_folded},
        {"identities_bypassed", r.identities_bypassed},
        {"float16_values_widened", r.float16_values_widened},
        {"float16_casts_added", r.float16_casts_added}};
    for (const auto& [name, n] : counts) e.args.emplace_back(name, std::to_string(n));
    s->profiler_->record(std::move(e));
  }
  return s;
}

Expected<Session*> Session::variant_for(const std::vector<std::string>& fed) {
  std::lock_guard<std::mutex> lock(variants_mu_);
  auto it = variants_.find(fed);
  if (it != variants_.end()) return it->second.get();
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, model_->with_inputs_fed(fed));
  SessionConfig config = config_;
  config.profile_path.clear();
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<Session> v,
                        create_charged(std::move(model), std::move(config), profiler_));
  v->budget_ = budget_;
  return variants_.emplace(fed, std::move(v)).first->second.get();
}

size_t Session::optimized_graph(Graph* out) const {
  *out = graph_;
  Graph& g = *out;
  // Optional inputs stop being inputs: the optimizer has folded their initializers in.
  std::erase_if(g.inputs, [&](int id) { return g.values[static_cast<size_t>(id)].constant; });
  size_t attached = 0;
  std::lock_guard<std::mutex> lock(plans_mu_);
  if (static_inputs(*model_)) {
    for (const CachedPlan& entry : lru_) {
      if (!entry.plan->dynamic) {
        keep_planned_values(g, *entry.plan);
        break;
      }
    }
  }
  for (const CachedPlan& entry : lru_) {
    for (const PlanStep& step : entry.plan->steps) {
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
    for (size_t i = 0; i < formal_inputs(node); ++i) present.push_back(node.inputs[i] >= 0);
    // Before any rewrite reads a node's inputs by position.
    TERN_RETURN_IF_ERROR(check_arity(*schema, present, node.outputs.size(), g.describe_node(n)));
    // The planning host's ops may still be computed while planning (shape arithmetic).
    bool any = std::any_of(planning_backends_.begin(), planning_backends_.end(),
                           [&](Backend* b) { return b->supports_op(node.op_type); });
    if (!any) {
      return unsupported(g.describe_node(n), ": no selected backend implements ", node.op_type);
    }
    for (const Graph* sub : subgraphs_of(node)) {
      TERN_RETURN_IF_ERROR(check_subgraph_ops(*sub).with_prefix(g.describe_node(n)));
    }
  }
  return Status::ok();
}

// A subgraph's ops are checked when the session is made, not when a run first reaches them.
Status Session::check_subgraph_ops(const Graph& g) const {
  const OpRegistry& ops = OpRegistry::global();
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (!node.domain.empty() && node.domain != "ai.onnx") {
      return unsupported("in a subgraph, ", g.describe_node(n), ": op domain '", node.domain,
                         "' is not supported");
    }
    if (!ops.find(node.op_type)) {
      return unsupported("in a subgraph, ", g.describe_node(n), ": op type ", node.op_type,
                         " is not supported by Tern");
    }
    for (const Graph* sub : subgraphs_of(node)) TERN_RETURN_IF_ERROR(check_subgraph_ops(*sub));
  }
  return Status::ok();
}

FlagValues Session::flags(const FlagOverrides* run_flags) const {
  return Flags::global().resolve(&config_.overrides, run_flags);
}

Expected<std::shared_ptr<const Plan>> Session::plan_for(const std::vector<Shape>& shapes,
                                                        const FlagValues& flags) {
  std::vector<std::string> kernel_backends;
  for (Backend* b : config_.backends) kernel_backends.push_back(b->kernel_backend());
  const std::vector<int64_t> flag_key = Flags::plan_key(flags, kernel_backends);
  std::vector<Shape> key = shapes;
  key.push_back(flag_key);
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      last_plan_ = it->second->plan;
      return last_plan_;
    }
  }
  std::vector<DType> dtypes;
  for (const IOInfo& in : model_->inputs()) dtypes.push_back(in.dtype);
  // oneDNN sizes a primitive's work split by the thread count current when it is created: the
  // kernels must be made under the threads their runs use.
  for (Backend* b : config_.backends) {
    b->set_num_threads(static_cast<int>(flags[FlagId::kNumThreads]));
  }
  const auto t0 = Profiler::Clock::now();
  const size_t full_before = profiler_ ? planner_->full_plans() : 0;
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan,
                        planner_->plan(shapes, dtypes, flags, flag_key));
  if (profiler_) {  // planning for new shapes is time a run spends: the trace shows it
    ProfileEvent e{"plan", "session", profiler_->since_start_us(t0), 0, Profiler::thread_number(),
                   {}};
    e.dur_us = profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
    std::string in;
    for (const Shape& sh : shapes) {
      if (!in.empty()) in += ' ';
      in += shape_str(sh);
    }
    e.args = {{"input_shapes", in},
              {"from", planner_->full_plans() > full_before ? "full plan" : "template"}};
    profiler_->record(std::move(e));
  }
  std::lock_guard<std::mutex> lock(plans_mu_);
  last_plan_ = plan;
  if (plans_.count(key)) return plan;  // another thread planned the same shapes meanwhile
  lru_.push_front(CachedPlan{key, plan, plan->footprint()});
  plans_[key] = lru_.begin();
  plan_bytes_ += lru_.front().bytes;
  while (plan_bytes_ > config_.plan_cache_bytes && lru_.size() > 1) {
    plan_bytes_ -= lru_.back().bytes;
    plans_.erase(lru_.back().key);
    lru_.pop_back();
  }
  return plan;
}

SessionMemory Session::memory() const {
  SessionMemory m;
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    m.plans = lru_.size();
    m.plan_bytes = plan_bytes_;
  }
  m.packed_weight_bytes = weights_->packed_bytes();
  m.arena_bytes = executor_->arena_bytes();
  m.full_plans = planner_->full_plans();
  m.template_plans = planner_->template_plans();
  // The subgraphs' nested sessions and dynamic plans' static prefixes.
  const SubgraphRunner::Memory sub = subgraphs_->memory();
  m.plans += sub.plans;
  m.plan_bytes += sub.plan_bytes;
  m.packed_weight_bytes += sub.packed_weight_bytes;
  m.arena_bytes += sub.arena_bytes;
  std::lock_guard<std::mutex> lock(variants_mu_);
  for (const auto& [names, v] : variants_) {
    const SessionMemory vm = v->memory();
    m.plans += vm.plans;
    m.plan_bytes += vm.plan_bytes;
    m.packed_weight_bytes += vm.packed_weight_bytes;
    m.arena_bytes += vm.arena_bytes;
    m.full_plans += vm.full_plans;
    m.template_plans += vm.template_plans;
  }
  return m;
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
      const size_t optional = model_->optional_inputs().size();
      return invalid_argument("unknown input name '", shorten(names[k]),
                              "' (the model's inputs: ", known,
                              optional ? str_cat("; and ", optional, " optional") : "", ")");
    }
    size_t idx = static_cast<size_t>(it - infos.begin());
    if ((*ordered)[idx]) return invalid_argument("input '", shorten(names[k]), "' is given twice");
    const Tensor* t = ins[k];
    if (t->dtype() != it->dtype) {
      return invalid_argument("input '", it->name, "' must be ", dtype_name(it->dtype), ", got ",
                              dtype_name(t->dtype()));
    }
    if (dtype_is_composite(t->dtype())) {
      TERN_RETURN_IF_ERROR(check_composite(*it, *t));
    } else if (it->has_shape) {
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
                            const Device& output_device, const RunControl* control) {
  // Runs that feed optional inputs go to the session compiled without those initializers.
  std::vector<std::string> fed;
  for (const std::string& name : input_names) {
    const auto& opt = model_->optional_inputs();
    if (std::any_of(opt.begin(), opt.end(), [&](const IOInfo& i) { return i.name == name; })) {
      fed.push_back(name);
    }
  }
  if (!fed.empty()) {
    std::sort(fed.begin(), fed.end());
    if (std::adjacent_find(fed.begin(), fed.end()) != fed.end()) {
      return invalid_argument("input '", *std::adjacent_find(fed.begin(), fed.end()),
                              "' is given twice");
    }
    TERN_ASSIGN_OR_RETURN(Session * variant, variant_for(fed));
    return variant->run_charged(input_names, inputs, output_names, outputs, run_flags,
                                output_device, control);
  }
  std::vector<const Tensor*> ordered;
  TERN_RETURN_IF_ERROR(check_inputs(input_names, inputs, &ordered));
  const Graph& g = graph_;
  std::vector<int> wanted;
  for (const std::string& name : output_names) {
    auto it = std::find_if(g.outputs.begin(), g.outputs.end(),
                           [&](int id) { return g.value_name(id) == name; });
    if (it == g.outputs.end()) return invalid_argument("unknown output name '", shorten(name), "'");
    wanted.push_back(*it);
  }
  FlagValues f = flags(run_flags);
  std::vector<Shape> shapes;
  for (const Tensor* t : ordered) shapes.push_back(t->shape());
  // The run's intra-op threads: num_threads, fewer where the tuner measured fewer to be faster,
  // then what the process-wide budget grants. The plan is made for that count.
  const int asked = static_cast<int>(f[FlagId::kNumThreads]);
  const bool adaptive = cpu_only_ && f.on(FlagId::kCpuAdaptiveThreads);
  const int want = adaptive ? tuner_.choose(shapes, asked) : asked;
  Status waited;
  ThreadBudget::Grant grant =
      ThreadBudget::global().acquire(want, f.on(FlagId::kCpuThreadBudgetWait), control, &waited);
  TERN_RETURN_IF_ERROR(waited);
  f.value[static_cast<size_t>(FlagId::kNumThreads)] = grant.threads();
  auto plan_and_run = [&]() -> Status {
    GrantedThreadScope granted(grant.threads());  // on a home: runs nested here share the grant
    TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, plan_for(shapes, f));
    // Inter-op workers beyond the intra-op threads come from the budget too.
    const int interop = static_cast<int>(f[FlagId::kNumInteropThreads]);
    if (interop > 1 && runs_concurrently(*plan, grant.threads(), interop)) {
      const int workers = std::min(interop, plan->width);
      const int extra = workers > grant.threads() ? grant.try_grow(workers - grant.threads()) : 0;
      f.value[static_cast<size_t>(FlagId::kNumInteropThreads)] =
          std::min(workers, std::max(grant.threads(), 1 + extra));
    }
    // Planning new shapes may have taken a while.
    TERN_RETURN_IF_ERROR(check_run(control, "the first step"));
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = adaptive ? thread_cpu_ms() : 0;
    Status st =
        executor_->run(*plan, std::move(ordered), wanted, f, output_device, outputs, control);
    if (adaptive && st.is_ok()) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      tuner_.record(shapes, asked, grant.threads(), ms, thread_cpu_ms() - cpu0);
    }
    return st;
  };
#if defined(TERN_HAVE_OPENMP)
  // Several intra-op threads on the CPU: planned and run on one of Tern's run homes, whose OpenMP
  // teams stay within the CPUs whatever the number of application threads (core/run_homes.h).
  // Runs nested in a run (subgraphs, variants, on an inter-op worker) stay where they are.
  if (cpu_only_ && grant.threads() > 1 && grant.outer() && f.on(FlagId::kCpuRunHomes)) {
    return RunHomes::global().run(plan_and_run);
  }
#endif
  return plan_and_run();
}

Status Session::run_resolved(std::vector<const Tensor*> ordered, const FlagValues& flags,
                             std::vector<Tensor>* outputs, const RunControl* control) {
  const auto& infos = model_->inputs();
  if (ordered.size() != infos.size()) {
    return internal_error("a subgraph run was given ", ordered.size(), " inputs of ", infos.size());
  }
  std::vector<Shape> shapes;
  for (size_t i = 0; i < infos.size(); ++i) {
    const Tensor* t = ordered[i];
    if (!t) return internal_error("subgraph input '", infos[i].name, "' is not given");
    if (infos[i].dtype != DType::kUndefined && t->dtype() != infos[i].dtype) {
      return invalid_argument("subgraph input '", infos[i].name, "' must be ",
                              dtype_name(infos[i].dtype), ", got ", dtype_name(t->dtype()));
    }
    shapes.push_back(t->shape());
  }
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, plan_for(shapes, flags));
  return executor_->run(*plan, std::move(ordered), graph_.outputs, flags, Device{}, outputs,
                        control);
}

}  // namespace tern
