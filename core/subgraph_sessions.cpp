#include "core/subgraph_sessions.h"

#include "core/session.h"

namespace tern {

namespace {

class NestedRunner final : public SubgraphRunner {
 public:
  NestedRunner(std::unique_ptr<Session> session, std::vector<int> slot, const FlagValues& flags)
      : session_(std::move(session)), slot_(std::move(slot)), flags_(flags) {}

  Status infer(const std::vector<TensorInfo>& inputs, std::vector<TensorInfo>* outputs,
               bool* shapes_known) const override {
    if (inputs.size() != slot_.size()) {
      return internal_error("a subgraph of ", slot_.size(), " inputs was given ", inputs.size());
    }
    std::vector<Shape> shapes(session_->model().inputs().size());
    for (size_t i = 0; i < slot_.size(); ++i) {
      if (slot_[i] >= 0) shapes[static_cast<size_t>(slot_[i])] = inputs[i].shape;
    }
    TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, session_->plan_for(shapes, flags_));
    const Graph& g = session_->graph();
    *shapes_known = !plan->dynamic;
    outputs->clear();
    for (int id : g.outputs) {
      TensorInfo t;
      t.present = true;
      if (plan->dynamic) {
        t.dtype = declared_dtype(g, id, inputs);
      } else {
        const PlannedValue& pv = plan->values[static_cast<size_t>(id)];
        t.dtype = pv.dtype;
        t.shape = pv.shape;
      }
      outputs->push_back(std::move(t));
    }
    return Status::ok();
  }

  Memory memory() const override {
    Memory m;
    if (auto plan = session_->last_plan()) m.last_plan_arena_bytes = plan->arena_bytes;
    const SessionMemory s = session_->memory();
    m.plans = s.plans;
    m.plan_bytes = s.plan_bytes;
    m.packed_weight_bytes = s.packed_weight_bytes;
    m.arena_bytes = s.arena_bytes;
    return m;
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
             const RunControl* control) const override {
    if (inputs.size() != slot_.size()) {
      return internal_error("a subgraph of ", slot_.size(), " inputs was given ", inputs.size());
    }
    std::vector<const Tensor*> ordered(session_->model().inputs().size(), nullptr);
    for (size_t i = 0; i < slot_.size(); ++i) {
      if (slot_[i] >= 0) ordered[static_cast<size_t>(slot_[i])] = inputs[i];
    }
    return session_->run_resolved(std::move(ordered), flags_, outputs, control);
  }

 private:
  // An output's dtype when shapes are not known: what the subgraph declares, or the dtype of the
  // input it passes on.
  DType declared_dtype(const Graph& g, int id, const std::vector<TensorInfo>& inputs) const {
    const DType d = g.values[static_cast<size_t>(id)].type.dtype;
    if (d != DType::kUndefined) return d;
    const auto& ins = session_->model().inputs();
    for (size_t i = 0; i < slot_.size(); ++i) {
      if (slot_[i] >= 0 && ins[static_cast<size_t>(slot_[i])].value == id) return inputs[i].dtype;
    }
    return DType::kUndefined;
  }

  std::unique_ptr<Session> session_;
  std::vector<int> slot_;  // by subgraph input: its index among the nested model's inputs, or -1
  FlagValues flags_;
};

}  // namespace

#if !defined(TERN_MINIMAL)
const Graph& SubgraphCompiler::derived(const Graph& body, int kind,
                                       Graph (*derive)(const Graph&, int)) {
  std::lock_guard<std::mutex> lock(derived_mu_);
  for (const auto& [key, g] : derived_) {
    if (key.first == &body && key.second == kind) return *g;
  }
  derived_.emplace_back(std::make_pair(&body, kind),
                        std::make_unique<const Graph>(derive(body, kind)));
  return *derived_.back().second;
}
#endif

SubgraphSessions::~SubgraphSessions() = default;

size_t SubgraphSessions::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runners_.size();
}

SubgraphRunner::Memory SubgraphSessions::memory() const {
  std::lock_guard<std::mutex> lock(mu_);
  SubgraphRunner::Memory total;
  for (const auto& [key, runner] : runners_) {
    const SubgraphRunner::Memory m = runner->memory();
    total.plans += m.plans;
    total.plan_bytes += m.plan_bytes;
    total.packed_weight_bytes += m.packed_weight_bytes;
    total.arena_bytes += m.arena_bytes;
  }
  return total;
}

Expected<std::shared_ptr<const SubgraphRunner>> SubgraphSessions::compile(
    const Graph& body, const std::vector<TensorInfo>& inputs, const FlagValues& flags) {
  if (inputs.size() != body.inputs.size()) {
    return invalid_model("the subgraph has ", body.inputs.size(), " inputs, the node gives ",
                         inputs.size());
  }
  std::vector<int64_t> key{static_cast<int64_t>(reinterpret_cast<uintptr_t>(&body))};
  for (const TensorInfo& t : inputs) {
    key.push_back(static_cast<int64_t>(t.dtype));
    key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.value)));
  }
  key.insert(key.end(), flags.value.begin(), flags.value.end());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runners_.find(key);
  if (it != runners_.end()) return it->second;

  // The subgraph as a model of its own: outer constants become its constants, the other inputs
  // (formal ones and captured computed values) inputs of any shape.
  Graph g = body;
  g.captured = 0;
  std::vector<int> slot(inputs.size(), -1);
  std::vector<int> fed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = body.inputs[i];
    Value& v = g.values[static_cast<size_t>(id)];
    const TensorInfo& t = inputs[i];
    if (!t.present) return invalid_model("subgraph input '", v.name, "' is not given");
    v.type.has_shape = false;
    v.type.dims.clear();
    v.type.dtype = t.dtype;
    if (t.value && t.value->on_host()) {
      v.constant = *t.value;
      continue;
    }
    slot[i] = static_cast<int>(fed.size());
    fed.push_back(id);
  }
  g.inputs = std::move(fed);
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                        Model::create(std::move(g), nullptr, "subgraph"));
  SessionConfig config = owner_->config_;
  config.profile_path.clear();
  TERN_ASSIGN_OR_RETURN(
      std::unique_ptr<Session> nested,
      Session::create_charged(std::move(model), std::move(config), owner_->profiler_));
  nested->budget_ = owner_->budget_;
  nested->executor_->set_run_category("subgraph");
  auto runner = std::make_shared<const NestedRunner>(std::move(nested), std::move(slot), flags);
  runners_.emplace(std::move(key), runner);
  return std::shared_ptr<const SubgraphRunner>(runner);
}

}  // namespace tern
