// Session planning: kernel choice per node, the mha fastpath fusion, and the arena layouts of a
// plan for one input-shape signature.
#include <algorithm>
#include <map>

#include "core/memory_plan.h"
#include "core/session.h"
#include "core/transfer.h"

namespace tern {

namespace {

// Bit sets over steps, for "must finish before" questions.
class StepSets {
 public:
  explicit StepSets(size_t n) : words_((n + 63) / 64), bits_(n * words_, 0) {}
  bool test(size_t set, size_t s) const { return (bits_[set * words_ + s / 64] >> (s % 64)) & 1; }
  void add(size_t set, size_t s) { bits_[set * words_ + s / 64] |= uint64_t{1} << (s % 64); }
  void merge(size_t into, size_t from) {
    for (size_t w = 0; w < words_; ++w) bits_[into * words_ + w] |= bits_[from * words_ + w];
  }

 private:
  size_t words_;
  std::vector<uint64_t> bits_;
};

// Rough work of a step in nanoseconds on one core, for the executor's choice only: convolutions
// and matrix products by their multiply-adds (~30 GFLOP/s), everything else by the elements it
// reads and writes (~1 ns each).
double estimate_step_cost(const Plan& plan, const PlanStep& step) {
  auto elems = [&](int v) {
    return v < 0 ? 0.0 : static_cast<double>(numel(plan.values[static_cast<size_t>(v)].shape));
  };
  auto shape = [&](size_t i) -> const Shape* {
    if (i >= step.inputs.size() || step.inputs[i] < 0) return nullptr;
    return &plan.values[static_cast<size_t>(step.inputs[i])].shape;
  };
  double out = 0.0, in = 0.0;
  for (int v : step.outputs) out += elems(v);
  for (int v : step.inputs) in += elems(v);
  const std::string& op = step.op_node->op_type;
  const Shape* w = shape(1);
  if ((op == "Conv" || op == "FusedConv" || op == "ConvTranspose") && w && w->size() >= 3) {
    double per_out = 1.0;  // weight elements per output channel: C/group x kernel
    for (size_t d = 1; d < w->size(); ++d) per_out *= static_cast<double>((*w)[d]);
    return 2.0 * out * per_out / 30.0;
  }
  if ((op == "MatMul" || op == "Gemm") && shape(0) && !shape(0)->empty()) {
    return 2.0 * out * static_cast<double>(shape(0)->back()) / 30.0;
  }
  return in + out;
}

}  // namespace

Status Session::choose_kernel(const OpContext& ctx, PlanStep* step) const {
  std::string reasons;
  for (Backend* b : config_.backends) {
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

bool Session::try_fuse(const AttentionMatch& m, const std::vector<PlannedValue>& values,
                       const FlagValues& flags, Plan* plan, PlanStep* step) const {
  const Graph& g = graph_;
  auto arena_value = [&](int id) {
    return id >= 0 && values[static_cast<size_t>(id)].where == PlannedValue::Where::kArena;
  };
  // Every replaced node must be a run-time step (not folded or shape math).
  for (size_t n : m.removed) {
    for (int id : g.nodes[n].outputs) {
      if (id >= 0 && !arena_value(id) &&
          values[static_cast<size_t>(id)].where != PlannedValue::Where::kOutput) {
        return false;
      }
    }
  }
  auto pv = [&](int id) -> const PlannedValue& { return values[static_cast<size_t>(id)]; };
  const Shape& q = pv(m.q).shape;
  const Shape& k = pv(m.k).shape;
  const Shape& v = pv(m.v).shape;
  if (pv(m.q).dtype != DType::kFloat32 || pv(m.k).dtype != DType::kFloat32 ||
      pv(m.v).dtype != DType::kFloat32) {
    return false;
  }
  const size_t r = q.size();
  if ((r != 3 && r != 4) || k.size() != r || v.size() != r) return false;
  // MatMul broadcasts batch dims; Attention needs them equal.
  for (size_t d = 0; d + 2 < r; ++d) {
    if (q[d] != k[d] || q[d] != v[d]) return false;
  }
  float scale = 1.0f;
  if (m.scale_value >= 0) {
    const PlannedValue& sv = pv(m.scale_value);
    if (sv.where != PlannedValue::Where::kConstant || sv.dtype != DType::kFloat32 ||
        sv.constant->numel() != 1) {
      return false;
    }
    float c = sv.constant->data<float>()[0];
    if (m.scale_divides) {
      if (c == 0.0f) return false;
      scale = 1.0f / c;
    } else {
      scale = c;
    }
  }
  const Shape& scores = pv(g.nodes[m.matmul_qk].outputs[0]).shape;
  if (m.add_node >= 0) {
    const PlannedValue& mask = pv(m.mask);
    if (mask.dtype != DType::kFloat32) return false;
    if (pv(g.nodes[static_cast<size_t>(m.add_node)].outputs[0]).shape != scores) return false;
  }
  auto node = std::make_unique<Node>();
  node->name = g.nodes[m.matmul_v].name;
  node->op_type = "Attention";
  node->inputs = {m.q, m.k, m.v};
  if (m.mask >= 0) node->inputs.push_back(m.mask);
  node->outputs = g.nodes[m.matmul_v].outputs;
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = scale;
  node->attrs.set("scale", a);
  if (r == 3) {  // [N, S, D] reads as one head per batch entry
    Attribute h;
    h.kind = Attribute::Kind::kInt;
    h.i = 1;
    node->attrs.set("q_num_heads", h);
    node->attrs.set("kv_num_heads", h);
  }
  std::string where = str_cat("fused Attention (mha fastpath) of ", g.describe_node(m.matmul_qk),
                              " .. ", g.describe_node(m.matmul_v));
  OpContext ctx;
  ctx.flags = &flags;
  if (!make_context(*node, where, values, &ctx).is_ok()) return false;
  if (ctx.outputs[0].shape != pv(node->outputs[0]).shape) return false;
  step->node = m.matmul_v;
  step->label = where;
  step->inputs = node->inputs;
  step->outputs = node->outputs;
  if (!choose_kernel(ctx, step).is_ok()) return false;
  step->op_node = node.get();
  plan->fused_nodes.push_back(std::move(node));
  return true;
}

Expected<std::shared_ptr<const Plan>> Session::build_plan(const std::vector<Shape>& shapes,
                                                          const std::vector<DType>& dtypes,
                                                          const FlagValues& flags) const {
  const Graph& g = graph_;
  auto plan = std::make_shared<Plan>();
  auto& values = plan->values;
  values.resize(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Tensor* c = g.values[v].constant ? &*g.values[v].constant : nullptr;
    if (c) values[v] = PlannedValue{PlannedValue::Where::kConstant, c->dtype(), c->shape(), c, 0};
  }
  for (size_t i = 0; i < model_->inputs().size(); ++i) {
    PlannedValue& pv = values[static_cast<size_t>(model_->inputs()[i].value)];
    pv = PlannedValue{PlannedValue::Where::kInput, dtypes[i], shapes[i], nullptr, i};
  }
  // 1. Shape inference over the whole graph; shape math is computed now.
  std::vector<std::unique_ptr<OpContext>> ctxs(g.nodes.size());
  for (size_t n : order_) {
    auto ctx = std::make_unique<OpContext>();
    ctx->flags = &flags;
    Status st = make_context(n, values, ctx.get());
    if (!st.is_ok() && ctx->needs_values) {
      plan->dynamic = true;
      plan->dynamic_reason = st.message();
      plan->steps.clear();
      return std::shared_ptr<const Plan>(std::move(plan));
    }
    TERN_RETURN_IF_ERROR(st);
    const Node& node = g.nodes[n];
    bool all_known = std::all_of(ctx->inputs.begin(), ctx->inputs.end(),
                                 [](const TensorInfo& t) { return !t.present || t.value; });
    bool from_shapes = std::all_of(ctx->output_values.begin(), ctx->output_values.end(),
                                   [](const auto& v) { return v.has_value(); });
    if (all_known || from_shapes) {
      // Shape math (Shape -> Slice -> Concat -> Reshape): computed now, constant during runs.
      std::vector<Tensor> outs;
      if (from_shapes) {
        for (auto& v : ctx->output_values) outs.push_back(std::move(*v));
      } else {
        TERN_RETURN_IF_ERROR(evaluate_now(*ctx, &outs, &flags));
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        int id = node.outputs[i];
        if (id < 0) continue;
        plan->known.push_back(std::make_unique<Tensor>(std::move(outs[i])));
        const Tensor* t = plan->known.back().get();
        values[static_cast<size_t>(id)] =
            PlannedValue{PlannedValue::Where::kConstant, t->dtype(), t->shape(), t, 0};
      }
      continue;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int id = node.outputs[i];
      if (id < 0) continue;
      if (ctx->outputs[i].dtype == DType::kString) {  // std::string objects never live in arenas
        plan->dynamic = true;
        plan->dynamic_reason = ctx->where + " computes strings";
        plan->steps.clear();
        return std::shared_ptr<const Plan>(std::move(plan));
      }
      values[static_cast<size_t>(id)] = PlannedValue{
          PlannedValue::Where::kArena, ctx->outputs[i].dtype, ctx->outputs[i].shape, nullptr, 0};
    }
    ctxs[n] = std::move(ctx);
  }
  for (int id : g.outputs) {
    PlannedValue& pv = values[static_cast<size_t>(id)];
    if (pv.where == PlannedValue::Where::kArena) pv.where = PlannedValue::Where::kOutput;
  }
  // 2. The mha fastpath: attention subgraphs that fit become one step.
  std::vector<int> fused_at(g.nodes.size(), -1);  // node -> index into fused_steps
  std::vector<bool> removed(g.nodes.size(), false);
  std::vector<PlanStep> fused_steps;
  if (flags.on(FlagId::kMhaFastpath)) {
    for (const AttentionMatch& m : patterns_) {
      if (std::any_of(m.removed.begin(), m.removed.end(), [&](size_t n) { return removed[n]; })) {
        continue;
      }
      PlanStep step;
      if (!try_fuse(m, values, flags, plan.get(), &step)) continue;
      for (size_t n : m.removed) removed[n] = true;
      fused_at[m.matmul_v] = static_cast<int>(fused_steps.size());
      fused_steps.push_back(std::move(step));
      ++plan->fused_attention;
    }
    // Values only the removed nodes wrote or read in between are never materialised.
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      if (!removed[n] || fused_at[n] >= 0) continue;
      for (int id : g.nodes[n].outputs) {
        if (id >= 0) values[static_cast<size_t>(id)].where = PlannedValue::Where::kNone;
      }
    }
  }
  // 2b. Shape-dependent fusions, then the layouts of convolution chains.
  fuse_residual_adds(values, ctxs, removed, flags, plan.get());
  plan_layouts(values, ctxs, removed, flags);
  // 3. Kernels, in topological order, with a reorder step before any consumer that needs plain
  // data from a blocked value.
  std::vector<int> producer_step(values.size(), -1);
  std::vector<int> plain_twin(values.size(), -1);
  auto add_step = [&](PlanStep step) {
    int s = static_cast<int>(plan->steps.size());
    for (int id : step.inputs) {
      int p = id < 0 ? -1 : producer_step[static_cast<size_t>(id)];
      if (p >= 0 && std::find(step.preds.begin(), step.preds.end(), p) == step.preds.end()) {
        step.preds.push_back(p);
        plan->steps[static_cast<size_t>(p)].succs.push_back(s);
      }
    }
    for (int id : step.outputs) {
      if (id >= 0) producer_step[static_cast<size_t>(id)] = s;
    }
    plan->steps.push_back(std::move(step));
  };
  auto to_plain = [&](int id, size_t consumer) -> Expected<int> {
    if (plain_twin[static_cast<size_t>(id)] >= 0) return plain_twin[static_cast<size_t>(id)];
    PlannedValue twin = values[static_cast<size_t>(id)];
    twin.block = 0;
    values.push_back(twin);
    const int t = static_cast<int>(values.size() - 1);
    producer_step.push_back(-1);
    plain_twin.push_back(-1);
    auto node = std::make_unique<Node>();
    node->name = g.value_name(id) + "/to_plain";
    node->op_type = "ReorderToPlain";
    node->inputs = {id};
    node->outputs = {t};
    OpContext ctx;
    ctx.flags = &flags;
    TERN_RETURN_IF_ERROR(make_context(*node, str_cat("reorder of '", g.value_name(id), "' to plain"),
                                      values, &ctx));
    ctx.inputs[0].block = values[static_cast<size_t>(id)].block;
    PlanStep step;
    step.node = consumer;
    step.op_node = node.get();
    step.label = ctx.where;
    step.inputs = node->inputs;
    step.outputs = node->outputs;
    TERN_RETURN_IF_ERROR(choose_kernel(ctx, &step));
    plan->fused_nodes.push_back(std::move(node));
    add_step(std::move(step));
    plain_twin[static_cast<size_t>(id)] = t;
    ++plan->reorders;
    return t;
  };
  // Device placement: a step on a device backend reads its inputs from that device's memory and
  // writes its outputs there; a value in the other memory gets a twin there (a constant is
  // uploaded now, anything else is copied by an inserted step, once per value and direction).
  std::map<std::pair<int, bool>, int> twins;  // (value, to device) -> twin value
  auto place = [&](int id, Backend* dev, bool to_device, size_t consumer) -> Expected<int> {
    auto known = twins.find({id, to_device});
    if (known != twins.end()) return known->second;
    PlannedValue twin = values[static_cast<size_t>(id)];
    twin.device = to_device ? dev->device() : Device{};
    twin.block = 0;
    if (twin.where == PlannedValue::Where::kConstant) {
      const Tensor& host = *twin.constant;
      const bool model_constant =
          static_cast<size_t>(id) < g.values.size() && g.values[static_cast<size_t>(id)].constant;
      if (model_constant) {  // uploaded once per session
        TERN_ASSIGN_OR_RETURN(twin.constant, device_constant(host, dev));
      } else {  // computed while planning: this plan's own
        TERN_ASSIGN_OR_RETURN(std::unique_ptr<Tensor> up, upload(host, dev));
        twin.constant = up.get();
        plan->device_constants.push_back(std::move(up));
      }
      values.push_back(twin);
      producer_step.push_back(-1);
      plain_twin.push_back(-1);
      const int t = static_cast<int>(values.size() - 1);
      twins[{id, to_device}] = t;
      return t;
    }
    twin.where = PlannedValue::Where::kArena;
    values.push_back(twin);
    producer_step.push_back(-1);
    plain_twin.push_back(-1);
    const int t = static_cast<int>(values.size() - 1);
    auto node = std::make_unique<Node>();
    node->name = str_cat(g.value_name(id), "/to_", twin.device.name());
    node->op_type = to_device ? "MemcpyToDevice" : "MemcpyToHost";
    node->inputs = {id};
    node->outputs = {t};
    PlanStep step;
    step.node = consumer;
    step.op_node = node.get();
    step.label = str_cat("copy of '", g.value_name(id), "' to ", twin.device.name());
    step.backend = dev;
    step.kernel = make_transfer_kernel(
        dev, to_device ? TransferDirection::kToDevice : TransferDirection::kToHost);
    step.inputs = node->inputs;
    step.outputs = node->outputs;
    step.transfer = true;
    plan->fused_nodes.push_back(std::move(node));
    add_step(std::move(step));
    ++plan->transfers;
    twins[{id, to_device}] = t;
    return t;
  };
  auto place_step = [&](PlanStep& step) -> Status {
    Backend* b = step.backend;
    if (!b->is_host()) {
      if (plan->device_backend && plan->device_backend != b) {
        return unsupported(step.label, ": kernels on two devices (", plan->device_backend->name(),
                           ", ", b->name(), ") in one session");
      }
      plan->device_backend = b;
      ++plan->device_steps;
    }
    const Device dev = b->device();
    for (int& id : step.inputs) {
      if (id < 0 || values[static_cast<size_t>(id)].device == dev) continue;
      Backend* through = b->is_host() ? plan->device_backend : b;
      TERN_ASSIGN_OR_RETURN(id, place(id, through, !b->is_host(), step.node));
    }
    for (int id : step.outputs) {
      if (id >= 0) values[static_cast<size_t>(id)].device = dev;
    }
    return Status::ok();
  };
  for (size_t n : order_) {
    PlanStep step;
    bool layout_aware = false;
    if (fused_at[n] >= 0) {
      step = std::move(fused_steps[static_cast<size_t>(fused_at[n])]);
    } else {
      if (!ctxs[n] || removed[n]) continue;
      const Node& node = *ctxs[n]->node;
      step.node = n;
      step.op_node = &node;
      step.label = ctxs[n]->where;
      step.inputs = node.inputs;
      step.outputs = node.outputs;
      layout_aware = reads_blocked(
          node, !node.outputs.empty() && node.outputs[0] >= 0
                    ? values[static_cast<size_t>(node.outputs[0])].block
                    : 0);
    }
    for (int& id : step.inputs) {
      if (id >= 0 && values[static_cast<size_t>(id)].block > 0 && !layout_aware) {
        TERN_ASSIGN_OR_RETURN(id, to_plain(id, n));
      }
    }
    if (!step.kernel) {
      OpContext& ctx = *ctxs[n];
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        if (step.inputs[i] >= 0) ctx.inputs[i].block = values[static_cast<size_t>(step.inputs[i])].block;
      }
      for (size_t i = 0; i < step.outputs.size(); ++i) {
        if (step.outputs[i] >= 0) {
          ctx.outputs[i].block = values[static_cast<size_t>(step.outputs[i])].block;
        }
      }
      Status chosen = choose_kernel(ctx, &step);
      // A kernel for blocked inputs may be missing (a pool or convolution oneDNN declines): when
      // the output is plain anyway, the inputs are made plain and the choice is made again.
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
        chosen = choose_kernel(ctx, &step);
      }
      TERN_RETURN_IF_ERROR(chosen);
    }
    TERN_RETURN_IF_ERROR(place_step(step));
    add_step(std::move(step));
  }
  // Graph outputs computed on a device stay in its arena; the run copies them out at its end.
  for (PlannedValue& pv : values) {
    if (pv.where == PlannedValue::Where::kOutput && !pv.device.is_host()) {
      pv.where = PlannedValue::Where::kArena;
    }
  }
  plan->input_read_on_host.assign(model_->inputs().size(), false);
  for (const PlanStep& st : plan->steps) {
    // A copy to the device passes a bound device input on; device kernels read only twins.
    if (st.transfer || !st.backend->is_host()) continue;
    for (int id : st.inputs) {
      if (id >= 0 && values[static_cast<size_t>(id)].where == PlannedValue::Where::kInput) {
        plan->input_read_on_host[values[static_cast<size_t>(id)].input_index] = true;
      }
    }
  }
  for (int id : g.outputs) {  // an input returned as an output is read by the host too
    const PlannedValue& pv = values[static_cast<size_t>(id)];
    if (pv.where == PlannedValue::Where::kInput) plan->input_read_on_host[pv.input_index] = true;
  }
  // 4. Arena layouts. Buffers: arena values, then one workspace per step that asks for one.
  const size_t nsteps = plan->steps.size();
  struct Buffer {
    size_t bytes;
    int value;  // -1 for a workspace
    int step;   // producer (or owner) step
    std::vector<int> readers;
    bool device = false;  // in the device arena
  };
  std::vector<Buffer> buffers;
  std::vector<int> buffer_of_value(values.size(), -1);
  for (size_t v = 0; v < values.size(); ++v) {
    if (values[v].where != PlannedValue::Where::kArena) continue;
    TERN_ASSIGN_OR_RETURN(int64_t n, checked_numel(values[v].shape));
    buffer_of_value[v] = static_cast<int>(buffers.size());
    buffers.push_back(Buffer{static_cast<size_t>(n) * dtype_size(values[v].dtype),
                             static_cast<int>(v),
                             producer_step[v],
                             {},
                             !values[v].device.is_host()});
  }
  for (size_t s = 0; s < nsteps; ++s) {
    for (int id : plan->steps[s].inputs) {
      int b = id < 0 ? -1 : buffer_of_value[static_cast<size_t>(id)];
      if (b >= 0) buffers[static_cast<size_t>(b)].readers.push_back(static_cast<int>(s));
    }
  }
  std::vector<int> workspace_buffer(nsteps, -1);
  for (size_t s = 0; s < nsteps; ++s) {
    if (size_t ws = plan->steps[s].kernel->workspace_bytes()) {
      workspace_buffer[s] = static_cast<int>(buffers.size());
      buffers.push_back(Buffer{ws, -1, static_cast<int>(s), {static_cast<int>(s)},
                               !plan->steps[s].backend->is_host()});
    }
  }
  // Graph outputs kept in the device arena are copied out after the last step: they live to the
  // end of the run, past their last reader.
  for (int id : g.outputs) {
    const int b = id < 0 ? -1 : buffer_of_value[static_cast<size_t>(id)];
    if (b >= 0) buffers[static_cast<size_t>(b)].readers.push_back(static_cast<int>(nsteps));
  }
  for (Buffer& b : buffers) {
    if (b.readers.empty()) b.readers.push_back(b.step);
  }
  // In place: a step whose kernel allows it writes its output over an input that only it reads
  // (same size and layout). The output's buffer joins the input's, which then lives until the
  // output's last reader; `owner` maps every buffer to the one whose memory it uses.
  std::vector<size_t> owner(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) owner[i] = i;
  for (size_t s = 0; s < nsteps; ++s) {
    const PlanStep& st = plan->steps[s];
    const int k = st.kernel->inplace_input();
    if (k < 0 || static_cast<size_t>(k) >= st.inputs.size() || st.outputs.empty()) continue;
    const int in = st.inputs[static_cast<size_t>(k)], out = st.outputs[0];
    if (in < 0 || out < 0) continue;
    const int bi = buffer_of_value[static_cast<size_t>(in)];
    const int bo = buffer_of_value[static_cast<size_t>(out)];
    if (bi < 0 || bo < 0) continue;
    Buffer& src = buffers[owner[static_cast<size_t>(bi)]];
    const Buffer& dst = buffers[static_cast<size_t>(bo)];
    const bool only_reader = std::all_of(buffers[static_cast<size_t>(bi)].readers.begin(),
                                         buffers[static_cast<size_t>(bi)].readers.end(),
                                         [&](int r) { return r == static_cast<int>(s); });
    if (!only_reader || src.bytes != dst.bytes || src.device != dst.device ||
        values[static_cast<size_t>(in)].block != values[static_cast<size_t>(out)].block) {
      continue;
    }
    src.readers.insert(src.readers.end(), dst.readers.begin(), dst.readers.end());
    owner[static_cast<size_t>(bo)] = owner[static_cast<size_t>(bi)];
    ++plan->in_place;
  }
  std::vector<size_t> roots;                          // host buffers that own their memory
  std::vector<size_t> device_roots;                   // the same in the device arena
  std::vector<size_t> request_of(buffers.size(), 0);  // buffer -> index among its roots
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (owner[i] != i) continue;
    std::vector<size_t>& r = buffers[i].device ? device_roots : roots;
    request_of[i] = r.size();
    r.push_back(i);
  }
  auto fill_layout = [&](const MemoryPlan& mp, ArenaLayout* l, bool device) {
    l->value_offset.assign(values.size(), 0);
    l->workspace_offset.assign(nsteps, 0);
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i].device != device) continue;
      const size_t offset = mp.offsets[request_of[owner[i]]];
      if (buffers[i].value >= 0) {
        l->value_offset[static_cast<size_t>(buffers[i].value)] = offset;
      } else {
        l->workspace_offset[static_cast<size_t>(buffers[i].step)] = offset;
      }
    }
    l->bytes = mp.arena_bytes;
    l->naive_bytes = mp.naive_bytes;
  };
  auto sequential = [&](const std::vector<size_t>& set) {
    std::vector<BufferRequest> requests;
    for (size_t r : set) {
      const Buffer& b = buffers[r];
      int last = *std::max_element(b.readers.begin(), b.readers.end());
      requests.push_back(BufferRequest{b.bytes, b.step, std::max(b.step, last)});
    }
    return plan_memory(requests);
  };
  fill_layout(sequential(roots), &plan->layouts[0], false);
  if (plan->device_backend) fill_layout(sequential(device_roots), &plan->device_layout, true);
  // Ancestors (steps that always finish before a step starts) and the widest DAG level.
  StepSets anc(nsteps);
  std::vector<int> level(nsteps, 0);
  for (size_t s = 0; s < nsteps; ++s) {
    for (int p : plan->steps[s].preds) {
      anc.merge(s, static_cast<size_t>(p));
      anc.add(s, static_cast<size_t>(p));
      level[s] = std::max(level[s], level[static_cast<size_t>(p)] + 1);
    }
  }
  std::map<int, int> per_level;
  for (int l : level) plan->width = std::max(plan->width, ++per_level[l]);
  // Work estimates: the whole plan's and its longest dependency chain's (steps are in order).
  std::vector<double> chain(nsteps, 0.0);
  for (size_t s = 0; s < nsteps; ++s) {
    const double c = estimate_step_cost(*plan, plan->steps[s]);
    double before = 0.0;
    for (int p : plan->steps[s].preds) before = std::max(before, chain[static_cast<size_t>(p)]);
    chain[s] = before + c;
    plan->total_cost += c;
    plan->critical_cost = std::max(plan->critical_cost, chain[s]);
  }
  // Plans with device steps run step after step (the device orders its own work).
  if (plan->width > 1 && !plan->device_backend) {
    std::vector<size_t> bytes;
    for (size_t r : roots) bytes.push_back(buffers[r].bytes);
    auto before = [&](const Buffer& x, const Buffer& y) {  // x is dead before y is written
      if (y.step < 0) return false;
      return std::all_of(x.readers.begin(), x.readers.end(), [&](int r) {
        return anc.test(static_cast<size_t>(y.step), static_cast<size_t>(r));
      });
    };
    fill_layout(plan_memory_general(bytes,
                                    [&](size_t i, size_t j) {
                                      const Buffer& x = buffers[roots[i]];
                                      const Buffer& y = buffers[roots[j]];
                                      return !before(x, y) && !before(y, x);
                                    }),
                &plan->layouts[1], false);
  }
  for (const PlanStep& st : plan->steps) plan->packed_weight_bytes += st.kernel->packed_bytes();
  plan->arena_bytes = plan->layouts[0].bytes;
  plan->naive_bytes = plan->layouts[0].naive_bytes;
  return std::shared_ptr<const Plan>(std::move(plan));
}

}  // namespace tern
