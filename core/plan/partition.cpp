#include "core/plan/partition.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>

#include "core/memory_budget.h"
#include "core/plan/layout.h"
#include "core/progress.h"
#include "core/threading.h"
#include "core/transfer.h"

namespace tern {

Status choose_kernel(const OpContext& ctx, const std::vector<Backend*>& backends, PlanStep* step) {
  std::string reasons;
  for (Backend* b : backends) {
    auto kernel = b->prepare(ctx);
    if (kernel) {
      step->backend = b;
      step->kernel = std::move(kernel).value();
      return Status::ok();
    }
    if (kernel.status().code() != Code::kUnsupported) return kernel.status().with_prefix(ctx.where);
    reasons += (reasons.empty() ? "" : "; ") + kernel.status().message();
  }
  return unsupported(ctx.where, ": ", reasons);
}

namespace {

#if !defined(TERN_MINIMAL)
// The blocks (TensorInfo::block) a context gives its inputs, then its outputs.
std::vector<int> context_blocks(const OpContext& ctx) {
  std::vector<int> blocks;
  for (const TensorInfo& t : ctx.inputs) blocks.push_back(t.block);
  for (const TensorInfo& t : ctx.outputs) blocks.push_back(t.block);
  return blocks;
}

// A kernel prepared ahead (Partitioner::prepare_ahead) for a context with these blocks.
struct Ahead {
  Backend* backend = nullptr;
  std::shared_ptr<const Kernel> kernel;
  std::vector<int> blocks;
};
// Fewer costly nodes than this are prepared on the planning thread alone: starting a helper
// costs about 0.1 ms.
constexpr size_t kMinAhead = 4;
#endif

// Builds the steps; one per partition() call.
class Partitioner {
 public:
  Partitioner(PlanGraph& pg, const std::vector<Backend*>& backends, WeightStore* weights,
              Plan* plan)
      : pg_(pg),
        g_(*pg.graph),
        backends_(backends),
        weights_(weights),
        plan_(plan),
        producer_step_(pg.values.size(), -1),
        plain_twin_(pg.values.size(), -1) {}

  Status run();

 private:
  int new_value(PlannedValue v, int source) {
    pg_.values.push_back(std::move(v));
    pg_.twin_of.push_back(source);
    producer_step_.push_back(-1);
    plain_twin_.push_back(-1);
    return static_cast<int>(pg_.values.size() - 1);
  }
  void add_step(PlanStep step);
  Expected<int> to_plain(int id, size_t consumer);
  Expected<int> place(int id, Backend* dev, bool to_device, size_t consumer);
  Status place_step(PlanStep& step);
  [[gnu::always_inline]] inline bool layout_aware(size_t n) const;
  Status choose_for_node(size_t n, PlanStep& step);
#if !defined(TERN_MINIMAL)
  void prepare_ahead();
  std::vector<Ahead> ahead_;  // by node
  size_t progress_base_ = 0;  // "prepare kernels" steps reported before the sequential pass
#else
  static constexpr size_t progress_base_ = 0;
#endif

  PlanGraph& pg_;
  const Graph& g_;
  const std::vector<Backend*>& backends_;
  WeightStore* weights_;
  Plan* plan_;
  std::vector<int> producer_step_;
  std::vector<int> plain_twin_;
  std::map<std::pair<int, bool>, int> twins_;  // (value, to device) -> twin value
};

void Partitioner::add_step(PlanStep step) {
  const int s = static_cast<int>(plan_->steps.size());
  for (int id : step.inputs) {
    const int p = id < 0 ? -1 : producer_step_[static_cast<size_t>(id)];
    if (p >= 0 && std::find(step.preds.begin(), step.preds.end(), p) == step.preds.end()) {
      step.preds.push_back(p);
      plan_->steps[static_cast<size_t>(p)].succs.push_back(s);
    }
  }
  for (int id : step.outputs) {
    if (id >= 0) producer_step_[static_cast<size_t>(id)] = s;
  }
  plan_->steps.push_back(std::move(step));
}

Expected<int> Partitioner::to_plain(int id, size_t consumer) {
  if (plain_twin_[static_cast<size_t>(id)] >= 0) return plain_twin_[static_cast<size_t>(id)];
  PlannedValue twin = pg_.value(id);
  twin.block = 0;
  const int t = new_value(twin, id);
  auto node = std::make_unique<Node>();
  node->name = g_.value_name(id) + "/to_plain";
  node->op_type = "ReorderToPlain";
  node->inputs = {id};
  node->outputs = {t};
  OpContext ctx;
  ctx.flags = pg_.flags;
  ctx.weights = pg_.weights;
  ctx.subgraphs = pg_.subgraphs;
  TERN_RETURN_IF_ERROR(make_node_context(
      g_, *node, str_cat("reorder of '", g_.value_name(id), "' to plain"), pg_.values, &ctx));
  PlanStep step;
  step.node = consumer;
  step.op_node = node.get();
  step.label = ctx.where;
  step.inputs = node->inputs;
  step.outputs = node->outputs;
  TERN_RETURN_IF_ERROR(choose_kernel(ctx, backends_, &step));
  pg_.nodes.push_back(std::move(node));
  add_step(std::move(step));
  plain_twin_[static_cast<size_t>(id)] = t;
  ++plan_->reorders;
  return t;
}

// A step on a device backend reads its inputs from that device's memory and writes its outputs
// there; a value in the other memory gets a twin there (a model constant is uploaded once per
// session, a value computed while planning once per plan, anything else is copied by an inserted
// step, once per value and direction).
Expected<int> Partitioner::place(int id, Backend* dev, bool to_device, size_t consumer) {
  auto known = twins_.find({id, to_device});
  if (known != twins_.end()) return known->second;
  PlannedValue twin = pg_.value(id);
  twin.device = to_device ? dev->device() : Device{};
  twin.block = 0;
  if (twin.where == PlannedValue::Where::kConstant) {
    const Tensor& host = *twin.constant;
    const bool model_constant =
        static_cast<size_t>(id) < g_.values.size() && g_.values[static_cast<size_t>(id)].constant;
    if (model_constant) {
      TERN_ASSIGN_OR_RETURN(twin.constant, weights_->device_constant(host, dev));
    } else {
      TERN_ASSIGN_OR_RETURN(std::unique_ptr<Tensor> up, upload(host, dev));
      twin.constant = up.get();
      plan_->device_constants.push_back(std::move(up));
    }
    const int t = new_value(twin, id);
    twins_[{id, to_device}] = t;
    return t;
  }
  twin.where = PlannedValue::Where::kArena;
  const int t = new_value(twin, id);
  auto node = std::make_unique<Node>();
  node->name = str_cat(g_.value_name(id), "/to_", twin.device.name());
  node->op_type = to_device ? "MemcpyToDevice" : "MemcpyToHost";
  node->inputs = {id};
  node->outputs = {t};
  PlanStep step;
  step.node = consumer;
  step.op_node = node.get();
  step.label = str_cat("copy of '", g_.value_name(id), "' to ", twin.device.name());
  step.backend = dev;
  step.kernel = make_transfer_kernel(
      dev, to_device ? TransferDirection::kToDevice : TransferDirection::kToHost);
  step.inputs = node->inputs;
  step.outputs = node->outputs;
  step.transfer = true;
  pg_.nodes.push_back(std::move(node));
  add_step(std::move(step));
  ++plan_->transfers;
  twins_[{id, to_device}] = t;
  return t;
}

Status Partitioner::place_step(PlanStep& step) {
  Backend* b = step.backend;
  if (!b->is_host()) {
    if (plan_->device_backend && plan_->device_backend != b) {
      return unsupported(step.label, ": kernels on two devices (", plan_->device_backend->name(),
                         ", ", b->name(), ") in one session");
    }
    plan_->device_backend = b;
    ++plan_->device_steps;
  }
  const Device dev = b->device();
  for (int& id : step.inputs) {
    if (id < 0 || pg_.value(id).device == dev) continue;
    Backend* through = b->is_host() ? plan_->device_backend : b;
    TERN_ASSIGN_OR_RETURN(id, place(id, through, !b->is_host(), step.node));
  }
  for (int id : step.outputs) {
    if (id >= 0) pg_.value(id).device = dev;
  }
  return Status::ok();
}

// Whether node n's kernel is to read its blocked inputs as they are (else they get plain twins).
inline bool Partitioner::layout_aware(size_t n) const {
  const Node& node = *pg_.ctxs[n]->node;
  // The layout rules are the first host backend's (the one layouts were chosen for).
  const Backend* host = nullptr;
  for (Backend* b : backends_) {
    if (b->is_host()) {
      host = b;
      break;
    }
  }
  const int out_block =
      !node.outputs.empty() && node.outputs[0] >= 0 ? pg_.value(node.outputs[0]).block : 0;
  return host && !pg_.is_plain_only(n) && reads_blocked(*host, node, out_block);
}

// The kernel for node n's context; blocked inputs the chosen kernel cannot read get plain twins.
Status Partitioner::choose_for_node(size_t n, PlanStep& step) {
  OpContext& ctx = *pg_.ctxs[n];
  const bool aware = layout_aware(n);
  for (int& id : step.inputs) {
    if (id >= 0 && pg_.value(id).block > 0 && !aware) {
      TERN_ASSIGN_OR_RETURN(id, to_plain(id, n));
    }
  }
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    if (step.inputs[i] >= 0) ctx.inputs[i].block = pg_.value(step.inputs[i]).block;
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (step.outputs[i] >= 0) ctx.outputs[i].block = pg_.value(step.outputs[i]).block;
  }
#if !defined(TERN_MINIMAL)
  if (n < ahead_.size() && ahead_[n].kernel) {
    Ahead made = std::move(ahead_[n]);
    if (made.blocks == context_blocks(ctx)) {
      step.backend = made.backend;
      step.kernel = std::move(made.kernel);
      return Status::ok();
    }
  }
#endif
  Status chosen = choose_kernel(ctx, backends_, &step);
  // A kernel for blocked inputs may be missing (a pool or convolution oneDNN declines): when the
  // output is plain anyway, the inputs are made plain and the choice is made again.
  const bool blocked_in = std::any_of(ctx.inputs.begin(), ctx.inputs.end(),
                                      [](const TensorInfo& t) { return t.block > 0; });
  const bool plain_out = std::all_of(ctx.outputs.begin(), ctx.outputs.end(),
                                     [](const TensorInfo& t) { return t.block == 0; });
  if (!chosen.is_ok() && chosen.code() == Code::kUnsupported && blocked_in && plain_out) {
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] >= 0 && ctx.inputs[i].block > 0) {
        TERN_ASSIGN_OR_RETURN(step.inputs[i], to_plain(step.inputs[i], n));
        ctx.inputs[i].block = 0;
      }
    }
    chosen = choose_kernel(ctx, backends_, &step);
  }
  // Declined with blocked data still in the context (a blocked output): the planner plans the
  // node on plain data and tries again.
  const bool blocked_any = std::any_of(ctx.inputs.begin(), ctx.inputs.end(),
                                       [](const TensorInfo& t) { return t.block > 0; }) ||
                           !std::all_of(ctx.outputs.begin(), ctx.outputs.end(),
                                        [](const TensorInfo& t) { return t.block == 0; });
  if (!chosen.is_ok() && chosen.code() == Code::kUnsupported && blocked_any) {
    pg_.declined_blocked = static_cast<int64_t>(n);
  }
  return chosen;
}

#if !defined(TERN_MINIMAL)
// Where the plan's runs use several threads, the costly kernels (Backend::prepares_concurrently)
// are prepared first, on this thread and helpers (as many threads as the runs use), each for its
// node's context as choose_for_node will give it; choose_for_node then takes the kernel made for
// a context like its own. On the CPU alone: device backends keep one thread's order.
void Partitioner::prepare_ahead() {
  const int threads = static_cast<int>(pg_.flags ? (*pg_.flags)[FlagId::kNumThreads]
                                                 : Flags::global().get(FlagId::kNumThreads));
  if (threads < 2) return;
  for (Backend* b : backends_) {
    if (!b->is_host()) return;
  }
  if (thread_cpu_affinity().size() < 2) return;  // no CPU for a helper
  std::vector<size_t> nodes;
  std::set<const Tensor*> weights;  // read by the nodes taken so far
  for (size_t n : *pg_.order) {
    if (!pg_.ctxs[n] || pg_.removed[n]) continue;
    const OpContext& ctx = *pg_.ctxs[n];
    if (!std::all_of(backends_.begin(), backends_.end(), [&](const Backend* b) {
          return b->prepares_concurrently(ctx.node->op_type);
        })) {
      continue;
    }
    // A kernel may pack its weights in a layout the session packed them in before (a weight
    // read by two convolutions): such nodes keep the sequential order. (Weights: constants of
    // rank 2 or more; scales and zero points, often shared, are not packed.)
    bool shared = false;
    for (const TensorInfo& in : ctx.inputs) {
      if (in.value && in.shape.size() >= 2 && !weights.insert(in.value).second) shared = true;
    }
    if (!shared) nodes.push_back(n);
  }
  if (nodes.size() < kMinAhead) return;
  ahead_.resize(pg_.ctxs.size());
  progress_base_ = nodes.size();
  const size_t progress_total = nodes.size() + pg_.order->size();
  for (size_t n : nodes) {  // the blocks choose_for_node's first choice gives the context
    OpContext& ctx = *pg_.ctxs[n];
    const Node& node = *ctx.node;
    const bool aware = layout_aware(n);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] >= 0) ctx.inputs[i].block = aware ? pg_.value(node.inputs[i]).block : 0;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] >= 0) ctx.outputs[i].block = pg_.value(node.outputs[i]).block;
    }
    ahead_[n].blocks = context_blocks(ctx);
  }
  const std::shared_ptr<MemoryBudget> budget = MemoryBudget::current();
  std::atomic<size_t> next{0};
  run_with_helpers(threads - 1, [&] {
    std::optional<BudgetScope> scope;
    if (on_helper_thread()) {
      scope.emplace(budget);  // what they pack is charged as on the planning thread
      for (Backend* b : backends_) b->set_num_threads(threads);  // primitives sized for the runs
    }
    for (size_t i; (i = next.fetch_add(1)) < nodes.size();) {
      const size_t n = nodes[i];
      if (!on_helper_thread()) report_progress("prepare kernels", i, progress_total);
      PlanStep step;
      Status chosen;
      try {
        chosen = choose_kernel(*pg_.ctxs[n], backends_, &step);
      } catch (...) {
        continue;  // choose_for_node meets it again, on the planning thread
      }
      if (!chosen.is_ok()) {
        // Declined with blocked data, the plan is made again with this node on plain data
        // (PlanGraph::declined_blocked): what the rest would prepare is not what it will want.
        const std::vector<int>& blocks = ahead_[n].blocks;
        if (std::any_of(blocks.begin(), blocks.end(), [](int b) { return b != 0; })) {
          next.store(nodes.size());
        }
        continue;
      }
      ahead_[n].backend = step.backend;
      ahead_[n].kernel = std::move(step.kernel);
    }
  });
}
#endif

Status Partitioner::run() {
#if !defined(TERN_MINIMAL)
  prepare_ahead();
#endif
  // Preparing a kernel packs its weights: the long part of a plan for big models.
  size_t visited = 0;
  for (size_t n : *pg_.order) {
    report_progress("prepare kernels", progress_base_ + visited++,
                    progress_base_ + pg_.order->size());
    if (!pg_.ctxs[n] || pg_.removed[n]) continue;
    const Node& node = *pg_.ctxs[n]->node;
    PlanStep step;
    step.node = n;
    step.op_node = &node;
    step.label = pg_.ctxs[n]->where;
    step.inputs = node.inputs;
    step.outputs = node.outputs;
    TERN_RETURN_IF_ERROR(choose_for_node(n, step));
    TERN_RETURN_IF_ERROR(place_step(step));
    add_step(std::move(step));
  }
  report_progress("prepare kernels", progress_base_ + visited, progress_base_ + pg_.order->size());
  // Graph outputs computed on a device stay in its arena; the run copies them out at its end.
  for (PlannedValue& pv : pg_.values) {
    if (pv.where == PlannedValue::Where::kOutput && !pv.device.is_host()) {
      pv.where = PlannedValue::Where::kArena;
    }
  }
  return Status::ok();
}

}  // namespace

Status partition(PlanGraph& pg, const std::vector<Backend*>& backends, size_t model_inputs,
                 WeightStore* weights, Plan* plan) {
  Partitioner p(pg, backends, weights, plan);
  TERN_RETURN_IF_ERROR(p.run());
  plan->values = pg.values;
  plan->known = pg.known;
  plan->fused_attention = pg.fused_attention;
  plan->fused_residuals = pg.fused_residuals;
  plan->input_read_on_host.assign(model_inputs, false);
  for (const PlanStep& st : plan->steps) {
    // A copy to the device passes a bound device input on; device kernels read only twins.
    if (st.transfer || !st.backend->is_host()) continue;
    for (int id : st.inputs) {
      if (id < 0) continue;
      const PlannedValue& pv = plan->values[static_cast<size_t>(id)];
      if (pv.where == PlannedValue::Where::kInput) plan->input_read_on_host[pv.input_index] = true;
    }
  }
  for (int id : pg.graph->outputs) {  // an input returned as an output is read by the host too
    const PlannedValue& pv = plan->values[static_cast<size_t>(id)];
    if (pv.where == PlannedValue::Where::kInput) plan->input_read_on_host[pv.input_index] = true;
  }
  return Status::ok();
}

}  // namespace tern
