#include "core/plan/plan_template.h"

#include <algorithm>

#include "core/opt/attention_fusion.h"
#include "core/opt/residual_fusion.h"
#include "core/plan/memory.h"
#include "core/plan/schedule.h"
#include "core/transfer.h"

namespace tern {

namespace {

void kernel_key(const PlanStep& s, const std::vector<PlannedValue>& values,
                std::vector<int64_t>* key) {
  key->clear();
  append_value_key(s.inputs, values, key);
  append_value_key(s.outputs, values, key);
}

uint64_t key_hash(const std::vector<int64_t>& key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (int64_t v : key) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  return h;
}

}  // namespace

std::shared_ptr<PlanTemplate> PlanTemplate::capture(PlanGraph& pg, ShapeMemo memo, Plan* plan) {
  auto t = std::make_shared<PlanTemplate>();
  t->graph_values_ = pg.graph->values.size();
  t->computed_ = pg.computed;
  t->fusions_ = pg.fusions;
  t->twin_of_ = pg.twin_of;
  t->values_.resize(plan->values.size());
  for (size_t v = 0; v < plan->values.size(); ++v) {
    const PlannedValue& pv = plan->values[v];
    ValueDecision& d = t->values_[v];
    d.where = pv.where;
    d.block = pv.block;
    d.channels_last = pv.block > 0 && pv.shape.size() == 4 && pv.block == pv.shape[1];
    d.device = pv.device;
  }
  for (const PlanStep& s : plan->steps) {
    Step st;
    st.shape.node = s.node;
    st.shape.op_node = s.op_node;
    st.shape.label = s.label;
    st.shape.backend = s.backend;
    st.shape.inputs = s.inputs;
    st.shape.outputs = s.outputs;
    st.shape.preds = s.preds;
    st.shape.succs = s.succs;
    st.shape.transfer = s.transfer;
    if (s.transfer) {
      st.shape.kernel = s.kernel;  // a copy has no shape of its own
    } else {
      std::vector<int64_t> key;
      kernel_key(s, plan->values, &key);
      const uint64_t h = key_hash(key);
      st.kernels.push_back(Step::CachedKernel{h, std::move(key), s.kernel});
    }
    for (size_t f = 0; f < pg.fusions.size(); ++f) {
      if (pg.fusions[f].node == s.op_node) st.fusion = static_cast<int>(f);
    }
    t->steps_.push_back(std::move(st));
  }
  t->nodes_ = std::move(pg.nodes);
  t->input_read_on_host_ = plan->input_read_on_host;
  t->device_backend_ = plan->device_backend;
  t->reorders_ = plan->reorders;
  t->transfers_ = plan->transfers;
  t->device_steps_ = plan->device_steps;
  t->fused_attention_ = plan->fused_attention;
  t->fused_residuals_ = plan->fused_residuals;
  t->memo_ = std::move(memo);
  plan->nodes_owner = t;
  return t;
}

bool PlanTemplate::refit_fusions(const PlannerContext& pc, PlanGraph& pg,
                                 std::vector<std::unique_ptr<OpContext>>* fused) const {
  fused->resize(fusions_.size());
  for (size_t i = 0; i < fusions_.size(); ++i) {
    const FusionRecord& f = fusions_[i];
    auto ctx = std::make_unique<OpContext>();
    if (f.kind == FusionRecord::Kind::kAttention) {
      const AttentionMatch& m = (*pc.attention)[f.match];
      if (!refit_attention(pg, m, *f.node, ctx.get())) return false;
    } else if (!refit_residual(pg, f, ctx.get())) {
      return false;
    }
    (*fused)[i] = std::move(ctx);
  }
  drop_unwritten_values(pg, fusions_);
  return true;
}

Status PlanTemplate::decide_values(const PlannerContext& pc, PlanGraph& pg, Plan* plan,
                                   bool* fits) const {
  const Graph& g = *pg.graph;
  plan->values.resize(values_.size());
  for (size_t v = 0; v < values_.size(); ++v) {
    const ValueDecision& d = values_[v];
    PlannedValue pv;
    if (v < graph_values_) {
      pv = pg.values[v];
      const bool constant = pv.where == PlannedValue::Where::kConstant;
      if (constant != (d.where == PlannedValue::Where::kConstant)) {
        *fits = false;
        return Status::ok();
      }
      if (!constant && pv.where != PlannedValue::Where::kInput) pv.where = d.where;
    } else {
      const size_t s = static_cast<size_t>(twin_of_[v - graph_values_]);
      pv = plan->values[s];
      pv.where = d.where;
      if (d.where == PlannedValue::Where::kConstant && !d.device.is_host()) {
        // A constant's twin in the device's memory: the model's are the session's, uploaded
        // once; values computed while planning are this plan's.
        if (s < g.values.size() && g.values[s].constant) {
          TERN_ASSIGN_OR_RETURN(pv.constant,
                                pc.weights->device_constant(*pv.constant, device_backend_));
        } else {
          TERN_ASSIGN_OR_RETURN(std::unique_ptr<Tensor> up, upload(*pv.constant, device_backend_));
          pv.constant = up.get();
          plan->device_constants.push_back(std::move(up));
        }
      }
    }
    pv.block = d.block;
    pv.device = d.device;
    if (pv.block > 0) {
      const bool ok = pv.shape.size() == 4 &&
                      (d.channels_last ? pv.shape[1] == pv.block : pv.shape[1] % pv.block == 0);
      if (!ok) {
        *fits = false;
        return Status::ok();
      }
    }
    plan->values[v] = std::move(pv);
  }
  return Status::ok();
}

Status PlanTemplate::instantiate_steps(PlanGraph& pg,
                                       std::vector<std::unique_ptr<OpContext>>& fused, Plan* plan,
                                       bool* fits) const {
  const Graph& g = *pg.graph;
  std::vector<int64_t> key;
  for (const Step& st : steps_) {
    PlanStep s = st.shape;
    if (!s.transfer) {
      kernel_key(s, plan->values, &key);
      const uint64_t hash = key_hash(key);
      for (auto it = st.kernels.begin(); it != st.kernels.end(); ++it) {
        if (it->hash != hash || it->key != key) continue;
        s.kernel = it->kernel;
        std::rotate(it, it + 1, st.kernels.end());  // most recently used last
        break;
      }
      if (!s.kernel) {
        // The step's inputs changed: its kernel is prepared for them on the backend chosen
        // before, from the context shape inference made (or one made now).
        OpContext* ctx = nullptr;
        std::unique_ptr<OpContext> own;
        const OpContext* graph_ctx = pg.ctxs[s.node].get();
        if (st.fusion >= 0) {
          ctx = fused[static_cast<size_t>(st.fusion)].get();
        } else if (graph_ctx && graph_ctx->node == s.op_node) {
          ctx = pg.ctxs[s.node].get();
        } else {
          own = std::make_unique<OpContext>();
          Status made = make_node_context(g, *s.op_node, s.label, plan->values, own.get());
          if (!made.is_ok()) {
            *fits = false;
            return Status::ok();
          }
          ctx = own.get();
        }
        ctx->flags = pg.flags;
        ctx->weights = pg.weights;
        ctx->subgraphs = pg.subgraphs;
        for (size_t i = 0; i < s.inputs.size(); ++i) {
          if (s.inputs[i] >= 0)
            ctx->inputs[i].block = plan->values[static_cast<size_t>(s.inputs[i])].block;
        }
        for (size_t i = 0; i < s.outputs.size(); ++i) {
          if (s.outputs[i] >= 0) {
            ctx->outputs[i].block = plan->values[static_cast<size_t>(s.outputs[i])].block;
          }
        }
        auto k = s.backend->prepare(*ctx);
        if (!k) {
          if (k.status().code() != Code::kUnsupported) return k.status().with_prefix(s.label);
          *fits = false;
          return Status::ok();
        }
        s.kernel = std::move(k).value();
        st.kernels.push_back(Step::CachedKernel{hash, key, s.kernel});
        if (st.kernels.size() > kKernelsPerStep) st.kernels.erase(st.kernels.begin());
      }
    }
    plan->steps.push_back(std::move(s));
  }
  return Status::ok();
}

Expected<std::shared_ptr<const Plan>> PlanTemplate::instantiate(const PlannerContext& pc,
                                                                const std::vector<Shape>& shapes,
                                                                const std::vector<DType>& dtypes,
                                                                const FlagValues& flags) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::shared_ptr<const Plan> none;
  // The template's own plan graph, reused: its values keep their shapes' storage.
  PlanGraph& pg = scratch_;
  ShapeInputs in = pc.shape_inputs(shapes, dtypes, flags);
  in.computed_hint = &computed_;
  bool planned = true;
  std::string reason;
  TERN_RETURN_IF_ERROR(infer_plan_shapes(in, &pg, &planned, &reason, &memo_, /*lazy=*/true));
  if (!planned || pg.computed != computed_) return none;
  std::vector<std::unique_ptr<OpContext>> fused;
  if (!refit_fusions(pc, pg, &fused)) return none;
  auto plan = std::make_shared<Plan>();
  bool fits = true;
  TERN_RETURN_IF_ERROR(decide_values(pc, pg, plan.get(), &fits));
  if (!fits) return none;
  TERN_RETURN_IF_ERROR(instantiate_steps(pg, fused, plan.get(), &fits));
  if (!fits) return none;
  plan->known = std::move(pg.known);
  plan->nodes_owner = shared_from_this();
  plan->input_read_on_host = input_read_on_host_;
  plan->device_backend = device_backend_;
  plan->reorders = reorders_;
  plan->transfers = transfers_;
  plan->device_steps = device_steps_;
  plan->fused_attention = fused_attention_;
  plan->fused_residuals = fused_residuals_;
  estimate_schedule(plan.get());
  TERN_RETURN_IF_ERROR(plan_arenas(pc.graph->outputs, plan.get()));
  return std::shared_ptr<const Plan>(std::move(plan));
}

}  // namespace tern
