#include "core/plan/shapes.h"

#include <algorithm>
#include <cstring>

#include "core/opt/graph_util.h"

namespace tern {

void append_value_key(const std::vector<int>& ids, const std::vector<PlannedValue>& values,
                      std::vector<int64_t>* key) {
  for (int id : ids) {
    if (id < 0) {
      key->push_back(-1);
      continue;
    }
    const PlannedValue& pv = values[static_cast<size_t>(id)];
    const Tensor* known = pv.where == PlannedValue::Where::kConstant ? pv.constant : nullptr;
    key->push_back(static_cast<int64_t>(pv.dtype));
    key->push_back(pv.block);
    key->push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(known)));
    key->push_back(static_cast<int64_t>(pv.shape.size()));
    key->insert(key->end(), pv.shape.begin(), pv.shape.end());
  }
}

namespace {

bool same_data(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || !a.on_host() || !b.on_host() ||
      a.dtype() == DType::kString) {
    return false;
  }
  return std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}

// Shape math for node n: its outputs are computed now and become constants of the plan (*made,
// by output).
Status compute_now(const ShapeInputs& in, size_t n, OpContext& ctx, bool from_shapes,
                   const ShapeMemo::Entry* memo, PlanGraph* pg,
                   std::vector<std::shared_ptr<const Tensor>>* made) {
  const Node& node = in.graph->nodes[n];
  made->assign(node.outputs.size(), nullptr);
  std::vector<Tensor> outs;
  if (from_shapes) {
    for (auto& v : ctx.output_values) outs.push_back(std::move(*v));
  } else {
    TERN_RETURN_IF_ERROR(evaluate_node(ctx, in.backends, *in.flags, &outs));
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const int id = node.outputs[i];
    if (id < 0) continue;
    std::shared_ptr<const Tensor> t;
    // Equal to what the last inference computed: the same tensor, so readers see no change.
    if (memo && i < memo->known.size() && memo->known[i] && same_data(*memo->known[i], outs[i])) {
      t = memo->known[i];
    } else {
      t = std::make_shared<const Tensor>(std::move(outs[i]));
    }
    pg->known.push_back(t);
    pg->value(id).set_constant(t.get());
    (*made)[i] = std::move(t);
  }
  pg->computed[n] = true;
  return Status::ok();
}

// Outputs up to this size are computed while planning when their inputs are known.
constexpr int64_t kMaxComputedBytes = int64_t{64} << 10;

bool small_outputs(const OpContext& ctx) {
  int64_t bytes = 0;
  for (const TensorInfo& t : ctx.outputs) {
    if (!t.present) continue;
    // Strings never live in arenas, and a shape inference could not give sizes: compute now.
    if (t.dtype == DType::kString || dtype_size(t.dtype) == 0) return true;
    int64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return true;
      n = d != 0 && n > kMaxComputedBytes / d ? kMaxComputedBytes + 1 : n * d;
    }
    bytes += n * static_cast<int64_t>(dtype_size(t.dtype));
    if (bytes > kMaxComputedBytes) return false;
  }
  return true;
}

// The outputs the memo holds for node n, when its inputs are what the memo saw.
bool reuse(const ShapeMemo::Entry& e, const Node& node, const std::vector<int64_t>& keys,
           PlanGraph* pg, size_t n) {
  if (!e.valid || e.in != keys) return false;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const int id = node.outputs[i];
    if (id < 0) continue;
    pg->value(id) = e.out[i];
    if (e.computed && e.known[i]) pg->known.push_back(e.known[i]);
  }
  pg->computed[n] = e.computed;
  return true;
}

void remember(const Node& node, const std::vector<int64_t>& keys, const PlanGraph& pg,
              bool computed, std::vector<std::shared_ptr<const Tensor>> made, ShapeMemo::Entry* e) {
  e->valid = true;
  e->computed = computed;
  e->in = keys;
  e->out.resize(node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] >= 0) {
      e->out[i] = pg.value(node.outputs[i]);
    } else {
      e->out[i].reset();
    }
  }
  e->known = std::move(made);
}

}  // namespace

Status infer_plan_shapes(const ShapeInputs& in, PlanGraph* pg, bool* planned,
                         std::string* dynamic_reason, ShapeMemo* memo, bool lazy) {
  const Graph& g = *in.graph;
  pg->graph = &g;
  pg->order = in.order;
  pg->flags = in.flags;
  pg->weights = in.weights;
  pg->subgraphs = in.subgraphs;
  // (Reset in place: a plan graph inferred again, a template's, keeps its shapes' and contexts'
  // storage instead of freeing and allocating it all again for every new shape.)
  pg->values.resize(g.values.size());
  for (PlannedValue& pv : pg->values) pv.reset();
  // Each node's context is made again in the one it had (the same inputs and ranks: its shapes
  // and names keep their storage).
  pg->spare_ctxs.resize(g.nodes.size());
  pg->ctxs.resize(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (pg->ctxs[n]) pg->spare_ctxs[n] = std::move(pg->ctxs[n]);
  }
  pg->computed.assign(g.nodes.size(), false);
  pg->removed.assign(g.nodes.size(), false);
  // (A plan graph reused for another inference, a template's, keeps nothing of the last one's.)
  pg->known.clear();
  if (memo) memo->nodes.resize(g.nodes.size());
  *planned = true;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].constant) pg->values[v].set_constant(&*g.values[v].constant);
  }
  for (size_t i = 0; i < in.inputs->size(); ++i) {
    if (dtype_is_composite(in.dtypes[i])) {  // sequences and optionals have no arena place
      *planned = false;
      *dynamic_reason =
          str_cat("input '", (*in.inputs)[i].name, "' is a ", dtype_name(in.dtypes[i]));
      return Status::ok();
    }
    PlannedValue& pv = pg->values[static_cast<size_t>((*in.inputs)[i].value)];
    pv.reset();
    pv.where = PlannedValue::Where::kInput;
    pv.dtype = in.dtypes[i];
    pv.shape = in.shapes[i];
    pv.input_index = i;
  }
  std::vector<int64_t> keys;  // one buffer for every node's key
  for (size_t n : *in.order) {
    const Node& node = g.nodes[n];
    ShapeMemo::Entry* entry = memo ? &memo->nodes[n] : nullptr;
    if (entry) {
      keys.clear();
      append_value_key(node.inputs, pg->values, &keys);
      if (reuse(*entry, node, keys, pg, n) && (lazy || entry->computed)) continue;
    }
    std::unique_ptr<OpContext> ctx = std::move(pg->spare_ctxs[n]);
    if (!ctx) ctx = std::make_unique<OpContext>();
    ctx->flags = in.flags;
    ctx->weights = in.weights;
    ctx->subgraphs = in.subgraphs;
    Status st = in.labels ? make_node_context(g, node, (*in.labels)[n], pg->values, ctx.get())
                          : make_node_context(g, node, g.describe_node(n), pg->values, ctx.get());
    if (!st.is_ok() && ctx->needs_values) {
      *planned = false;
      *dynamic_reason = st.message();
      if (memo) memo->nodes.assign(g.nodes.size(), ShapeMemo::Entry{});
      return Status::ok();
    }
    TERN_RETURN_IF_ERROR(st);
    if (ctx->outputs_from_run) {
      *planned = false;
      *dynamic_reason = ctx->where + ": its output shapes are known only when it runs";
      if (memo) memo->nodes.assign(g.nodes.size(), ShapeMemo::Entry{});
      return Status::ok();
    }
    const bool all_known = std::all_of(ctx->inputs.begin(), ctx->inputs.end(),
                                       [](const TensorInfo& t) { return !t.present || t.value; });
    const bool from_shapes = std::all_of(ctx->output_values.begin(), ctx->output_values.end(),
                                         [](const auto& v) { return v.has_value(); });
    // A node whose inputs are all known is computed now only when its outputs are small (shape
    // math); a large one (a positional-embedding Gather over Range(0, seq)) runs as a step, into
    // the arena, instead of allocating a plan constant every time the sequence length changes.
    // (Random draws are made at each run.)
    bool compute = from_shapes || (all_known && small_outputs(*ctx) && !random_op(node.op_type));
    if (in.computed_hint && all_known && !from_shapes && !(*in.computed_hint)[n]) compute = false;
    if (in.computed_hint && compute != (*in.computed_hint)[n]) {
      *planned = false;  // not the plan that is being refitted: no reason, nothing is dynamic
      return Status::ok();
    }
    if (compute) {
      std::vector<std::shared_ptr<const Tensor>> made;
      TERN_RETURN_IF_ERROR(compute_now(in, n, *ctx, from_shapes, entry, pg, &made));
      if (entry) remember(node, keys, *pg, true, std::move(made), entry);
      continue;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const int id = node.outputs[i];
      if (id < 0) continue;
      const DType dt = ctx->outputs[i].dtype;
      if (dt == DType::kString || dtype_is_composite(dt)) {  // no arena place for these
        *planned = false;
        *dynamic_reason = str_cat(ctx->where, " computes ",
                                  dt == DType::kString ? "strings" : dtype_name(dt), "s");
        if (memo) memo->nodes.assign(g.nodes.size(), ShapeMemo::Entry{});
        return Status::ok();
      }
      PlannedValue& pv = pg->value(id);
      pv.reset();
      pv.where = PlannedValue::Where::kArena;
      pv.dtype = ctx->outputs[i].dtype;
      pv.shape = ctx->outputs[i].shape;
    }
    pg->ctxs[n] = std::move(ctx);
    if (entry) remember(node, keys, *pg, false, {}, entry);
  }
  for (int id : g.outputs) {
    PlannedValue& pv = pg->value(id);
    if (pv.where == PlannedValue::Where::kArena) pv.where = PlannedValue::Where::kOutput;
  }
  return Status::ok();
}

}  // namespace tern
