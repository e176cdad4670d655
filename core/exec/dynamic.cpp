// Dynamic execution (Plan::dynamic): shape inference and a kernel per node on the run's actual
// values, for graphs whose shapes depend on computed values, that compute strings, or that pass
// sequences and optionals. Inference runs for every node on every run (its outputs may depend on
// the data: NonZero, NonMaxSuppression), but kernels are prepared once per node and input
// signature and kept (DynamicKernels), so a detector's convolutions do not build their
// primitives again on every image. A kernel is prepared seeing only the values every run shares
// (the graph's constants and the value inputs its schema reads), never data of one run.
#include <algorithm>
#include <cstring>

#include "core/exec/executor.h"
#include "core/op_registry.h"
#include "core/plan/static_prefix.h"

namespace tern {

namespace {

// The cache key of node n's kernel: per input its dtype and shape, the identity of a graph
// constant, the bytes of a value input (Reshape's shape...).
std::vector<int64_t> kernel_key(size_t n, const OpContext& ctx, const OpSchema& schema) {
  std::vector<int64_t> key{static_cast<int64_t>(n)};
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorInfo& t = ctx.inputs[i];
    key.push_back(t.present ? static_cast<int64_t>(t.dtype) : -1);
    key.push_back(static_cast<int64_t>(t.shape.size()));
    key.insert(key.end(), t.shape.begin(), t.shape.end());
    const bool value_input = std::find(schema.value_inputs.begin(), schema.value_inputs.end(),
                                       static_cast<int>(i)) != schema.value_inputs.end();
    if (t.value && t.graph_constant) {
      key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.value)));
    } else if (t.value && value_input && t.value->on_host() && t.dtype != DType::kString) {
      const size_t bytes = t.value->byte_size();
      std::vector<int64_t> words((bytes + 7) / 8, 0);
      if (bytes) std::memcpy(words.data(), t.value->raw(), bytes);
      key.push_back(static_cast<int64_t>(bytes));
      key.insert(key.end(), words.begin(), words.end());
    }
  }
  return key;
}

// Nodes whose kernels read run data while preparing (subgraphs compiled per sequence types,
// sequences and optionals) or make outputs of run-time shapes are prepared per run.
bool cacheable(const OpContext& ctx) {
  if (ctx.outputs_from_run) return false;
  for (const TensorInfo& t : ctx.inputs) {
    if (t.present && (dtype_is_composite(t.dtype) || t.dtype == DType::kString)) return false;
  }
  for (const TensorInfo& t : ctx.outputs) {
    if (t.present && (dtype_is_composite(t.dtype) || t.dtype == DType::kString)) return false;
  }
  return true;
}

}  // namespace

Expected<std::shared_ptr<const Executor::DynamicKernel>> Executor::dynamic_kernel(
    size_t n, const OpContext& ctx) const {
  const OpSchema* schema = OpRegistry::global().find(ctx.node->op_type);
  const bool cache = schema && cacheable(ctx);
  std::vector<int64_t> key;
  if (cache) {
    key = kernel_key(n, ctx, *schema);
    std::lock_guard<std::mutex> lock(dynamic_mu_);
    auto it = dynamic_kernels_.find(key);
    if (it != dynamic_kernels_.end()) return it->second;
  }
  // What every run shares: the data of one run is hidden from the kernel's preparation.
  OpContext shared = ctx;
  for (size_t i = 0; cache && i < shared.inputs.size(); ++i) {
    TensorInfo& t = shared.inputs[i];
    const bool value_input = std::find(schema->value_inputs.begin(), schema->value_inputs.end(),
                                       static_cast<int>(i)) != schema->value_inputs.end();
    if (!t.graph_constant && !value_input) t.value = nullptr;
  }
  auto dk = std::make_shared<DynamicKernel>();
  TERN_ASSIGN_OR_RETURN(dk->kernel, prepare_on_host(cache ? shared : ctx, backends_, &dk->backend));
  if (cache) {
    std::lock_guard<std::mutex> lock(dynamic_mu_);
    // A bound: graphs whose shapes change on every run (detections per image) would otherwise
    // keep a kernel per shape for ever.
    if (dynamic_kernels_.size() >= kMaxDynamicKernels) dynamic_kernels_.clear();
    dynamic_kernels_.emplace(std::move(key), dk);
  }
  return std::shared_ptr<const DynamicKernel>(std::move(dk));
}

Status Executor::run_dynamic(const Plan& plan, const std::vector<const Tensor*>& ordered,
                             const std::vector<int>& wanted, const FlagValues& flags,
                             std::vector<Tensor>* outputs, const RunControl* control) const {
  const Graph& g = graph_;
  std::vector<PlannedValue> values(g.values.size());
  std::vector<std::unique_ptr<Tensor>> held(g.values.size());  // computed during this run
  auto hold = [&](size_t id, Tensor t) {
    held[id] = std::make_unique<Tensor>(std::move(t));
    const Tensor* p = held[id].get();
    values[id] = PlannedValue::of_constant(p);
  };
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) values[v] = PlannedValue::of_constant(&*g.values[v].constant);
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    values[static_cast<size_t>(inputs_[i].value)] = PlannedValue::of_constant(ordered[i]);
  }
  const auto run_t0 = profiler_ ? Profiler::Clock::now() : Profiler::Clock::time_point();
  // The static prefix first: one planned run of the nodes whose shapes do not depend on data.
  const StaticPrefix* prefix = plan.prefix.get();
  auto computed_by_prefix = [&](size_t n) { return prefix && prefix->node_static[n]; };
  if (prefix) {
    std::vector<const Tensor*> in;
    for (size_t slot : prefix->inputs) in.push_back(ordered[slot]);
    std::vector<Tensor> outs;
    TERN_RETURN_IF_ERROR(prefix->runner->run(in, &outs, control));
    for (size_t k = 0; k < outs.size(); ++k) {
      hold(static_cast<size_t>(prefix->outputs[k]), std::move(outs[k]));
    }
  }
  // Readers left per value, so intermediate tensors are freed after their last use.
  std::vector<int> readers(g.values.size(), 0);
  for (size_t n : order_) {
    if (computed_by_prefix(n)) continue;
    for (int id : g.nodes[n].inputs) {
      if (id >= 0) ++readers[static_cast<size_t>(id)];
    }
  }
  for (int id : g.outputs) readers[static_cast<size_t>(id)] += 1 << 20;  // never freed
  for (size_t n : order_) {
    if (computed_by_prefix(n)) continue;
    OpContext ctx;
    ctx.flags = &flags;
    ctx.weights = weights_;
    ctx.subgraphs = subgraphs_;
    TERN_RETURN_IF_ERROR(make_node_context(g, g.nodes[n], g.describe_node(n), values, &ctx));
    TERN_RETURN_IF_ERROR(check_run(control, ctx.where));
    const Node& node = g.nodes[n];
    std::vector<Tensor> outs;
    const bool from_shapes = std::all_of(ctx.output_values.begin(), ctx.output_values.end(),
                                         [](const auto& v) { return v.has_value(); });
    if (from_shapes && !ctx.output_values.empty()) {
      for (auto& v : ctx.output_values) outs.push_back(std::move(*v));
    } else {
      TERN_ASSIGN_OR_RETURN(auto dk, dynamic_kernel(n, ctx));
      const auto t0 = profiler_ ? Profiler::Clock::now() : Profiler::Clock::time_point();
      TERN_RETURN_IF_ERROR(run_prepared(ctx, *dk->kernel, dk->backend, flags, &outs, control));
      if (profiler_) record_dynamic(ctx, *dk, outs, t0, flags);
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] >= 0) hold(static_cast<size_t>(node.outputs[i]), std::move(outs[i]));
    }
    for (int id : node.inputs) {
      if (id >= 0 && --readers[static_cast<size_t>(id)] == 0 && held[static_cast<size_t>(id)]) {
        held[static_cast<size_t>(id)].reset();
        values[static_cast<size_t>(id)] = PlannedValue{};
      }
    }
  }
  // Outputs this run computed and alone owns are handed out as they are (a Loop body's carried
  // value grows each iteration: copying it out made the loop quadratic). Once the run's own
  // references are gone, what is still shared (an input, a constant, a view of one, a value
  // wanted twice) is copied.
  std::vector<Tensor> result;
  for (int id : wanted) {
    const PlannedValue& pv = values[static_cast<size_t>(id)];
    if (!pv.constant) return internal_error("output '", g.value_name(id), "' was not computed");
    result.push_back(*pv.constant);
  }
  held.clear();
  for (Tensor& t : result) {
    if (dtype_is_composite(t.dtype()) || !t.owns_storage_alone()) {
      TERN_ASSIGN_OR_RETURN(t, t.clone());
    }
  }
  *outputs = std::move(result);
  if (profiler_) {
    ProfileEvent e{run_category_,
                   run_category_,
                   profiler_->since_start_us(run_t0),
                   0,
                   Profiler::thread_number(),
                   {}};
    e.dur_us = profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
    e.args = {{"dynamic", "1"}, {"nodes", std::to_string(order_.size())}};
    profiler_->record(std::move(e));
  }
  return Status::ok();
}

void Executor::record_dynamic(const OpContext& ctx, const DynamicKernel& dk,
                              const std::vector<Tensor>& outs, Profiler::Clock::time_point t0,
                              const FlagValues& flags) const {
  ProfileEvent e{ctx.node->name.empty() ? ctx.where : ctx.node->name,
                 "node",
                 profiler_->since_start_us(t0),
                 0,
                 Profiler::thread_number(),
                 {}};
  e.dur_us = profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
  std::string in_shapes, out_shapes;
  for (const TensorInfo& t : ctx.inputs) {
    if (!in_shapes.empty()) in_shapes += ' ';
    in_shapes += t.present ? str_cat(dtype_name(t.dtype), shape_str(t.shape)) : std::string("-");
  }
  for (const Tensor& t : outs) {
    if (!out_shapes.empty()) out_shapes += ' ';
    out_shapes += t.defined() ? str_cat(dtype_name(t.dtype()), shape_str(t.shape())) : "-";
  }
  e.args = {{"op", ctx.node->op_type},
            {"step", ctx.where},
            {"backend", dk.backend->name()},
            {"kernel", dk.kernel->name()},
            {"inputs", in_shapes},
            {"outputs", out_shapes},
            {"threads", std::to_string(flags[FlagId::kNumThreads])},
            {"dynamic", "1"}};
  profiler_->record(std::move(e));
}

}  // namespace tern
