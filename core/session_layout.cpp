// Plan-time graph rewrites that need shapes: residual-Add fusion into FusedConv, and layout
// planning. Convolutions run fastest on channel-blocked activations (oneDNN's nChw16c on AVX-512,
// nChw8c on AVX2), so a chain of them, with the elementwise ops between, keeps that layout; a
// consumer that needs plain data gets a ReorderToPlain step at the edge.
#include <algorithm>
#include <set>

#include "core/session.h"

namespace tern {

namespace {

bool is_conv(const std::string& op) {
  return op == "Conv" || op == "FusedConv";
}

// Elementwise ops whose kernels read and write every element in memory order, so they compute
// the same on any layout their inputs and output share.
bool layout_transparent(const std::string& op) {
  static const std::set<std::string> ops = {
      "Relu", "Clip",  "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh", "Elu",
      "Selu", "Identity", "Add",  "Sub",         "Mul",       "Div",       "Max",  "Min"};
  return ops.count(op) != 0;
}

// Pooling that oneDNN runs on blocked data: 2-D windows without an Indices output or dilations.
bool blocked_pool(const Node& node) {
  if (node.op_type != "MaxPool" && node.op_type != "AveragePool") return false;
  if (node.outputs.size() > 1 && node.outputs[1] >= 0) return false;
  auto dil = node.attrs.get_ints("dilations", {});
  auto order = node.attrs.get_int("storage_order", 0);
  auto ceil = node.attrs.get_int("ceil_mode", 0);
  auto cip = node.attrs.get_int("count_include_pad", 0);
  if (!dil || !order || !ceil || !cip || *order != 0) return false;
  if (node.op_type == "AveragePool" && *ceil != 0 && *cip != 0) return false;
  return std::all_of(dil->begin(), dil->end(), [](int64_t d) { return d == 1; });
}

}  // namespace

bool Session::reads_blocked(const Node& node, int output_block) {
  if (is_conv(node.op_type) || output_block > 0) return true;
  return node.op_type == "GlobalAveragePool" || node.op_type == "GlobalMaxPool";
}

void Session::fuse_residual_adds(std::vector<PlannedValue>& values,
                                 std::vector<std::unique_ptr<OpContext>>& ctxs,
                                 std::vector<bool>& removed, const FlagValues& flags,
                                 Plan* plan) const {
  const Graph& g = graph_;
  const auto consumers = value_consumers(g);
  const std::vector<int> producer = value_producers(g);
  auto arena_only_for = [&](int id, size_t reader) {
    const auto& c = consumers[static_cast<size_t>(id)];
    return values[static_cast<size_t>(id)].where == PlannedValue::Where::kArena && c.size() == 1 &&
           c[0] == reader;
  };
  for (size_t n : order_) {
    if (!ctxs[n] || removed[n]) continue;
    const Node& add = *ctxs[n]->node;
    if (add.op_type != "Add" || add.inputs.size() != 2) continue;
    const Shape& out = ctxs[n]->outputs[0].shape;
    for (int side = 0; side < 2; ++side) {
      const int y = add.inputs[static_cast<size_t>(side)];
      const int z = add.inputs[static_cast<size_t>(1 - side)];
      const int c = y < 0 ? -1 : producer[static_cast<size_t>(y)];
      if (c < 0 || !ctxs[static_cast<size_t>(c)] || removed[static_cast<size_t>(c)] || y == z) {
        continue;
      }
      const Node& conv = *ctxs[static_cast<size_t>(c)]->node;
      if (!is_conv(conv.op_type) || has_epilogue(conv) || conv.inputs.size() > 3 ||
          !arena_only_for(y, n)) {
        continue;
      }
      const PlannedValue& zv = values[static_cast<size_t>(z)];
      if (zv.shape != out || values[static_cast<size_t>(y)].shape != out ||
          zv.dtype != DType::kFloat32 || zv.where == PlannedValue::Where::kNone) {
        continue;
      }
      auto fused = std::make_unique<Node>(conv);
      fused->op_type = "FusedConv";
      fused->inputs.resize(3, -1);
      fused->inputs.push_back(z);
      fused->outputs = add.outputs;
      // The element-wise steps after the sum, each its predecessor's only reader, join the
      // epilogue; the last one's step computes the whole.
      std::vector<size_t> chain;  // the sum's node, then the steps folded after it
      chain.push_back(n);
      for (;;) {
        const int v = fused->outputs[0];
        const auto& readers = consumers[static_cast<size_t>(v)];
        if (readers.size() != 1 || !ctxs[readers[0]] || removed[readers[0]] ||
            !arena_only_for(v, readers[0])) {
          break;
        }
        const OpContext& rc = *ctxs[readers[0]];
        auto act = activation_of(g, *rc.node);
        if (!act || rc.node->inputs[static_cast<size_t>(act->input)] != v ||
            rc.outputs[0].shape != out || rc.outputs[0].dtype != DType::kFloat32) {
          break;
        }
        append_fused_activation(*fused, *act);
        fused->outputs = rc.node->outputs;
        chain.push_back(readers[0]);
      }
      const size_t anchor = chain.back();
      auto ctx = std::make_unique<OpContext>();
      ctx->flags = &flags;
      const std::string where =
          str_cat("fused Conv+Add", anchor != n ? "+activation" : "", " of ",
                  g.describe_node(static_cast<size_t>(c)), " .. ", g.describe_node(anchor));
      if (!make_context(*fused, where, values, ctx.get()).is_ok()) continue;
      values[static_cast<size_t>(y)].where = PlannedValue::Where::kNone;
      for (size_t i = 0; i + 1 < chain.size(); ++i) {
        values[static_cast<size_t>(ctxs[chain[i]]->node->outputs[0])].where =
            PlannedValue::Where::kNone;
        removed[chain[i]] = true;
      }
      removed[static_cast<size_t>(c)] = true;
      ctxs[anchor] = std::move(ctx);
      plan->fused_nodes.push_back(std::move(fused));
      ++plan->fused_residuals;
      break;
    }
  }
}

void Session::plan_layouts(std::vector<PlannedValue>& values,
                           const std::vector<std::unique_ptr<OpContext>>& ctxs,
                           const std::vector<bool>& removed, const FlagValues& flags) const {
  int block = 0;
  for (Backend* b : config_.backends) {
    // Device kernels read plain tensors: with a device in the session no layout is blocked.
    if (!b->is_host()) return;
    block = std::max(block, b->channel_block(flags));
  }
  if (block == 0) return;
  // Channels-last (one block of all channels, TensorInfo::block == C) where oneDNN's brgemm
  // convolutions beat its blocked direct ones: AVX-512 and dense convolutions (ResNet-18 at one
  // thread: 16.6 ms instead of 20.3). Grouped / depthwise ones keep the blocked layout.
  const int format = flags[FlagId::kCpuConvMemoryFormat];
  bool channels_last = format == 2;
  if (format == 0 && block == 16) {
    channels_last = true;
    for (size_t n : order_) {
      if (!ctxs[n] || removed[n] || !is_conv(ctxs[n]->node->op_type)) continue;
      auto group = ctxs[n]->node->attrs.get_int("group", 1);
      if (!group || *group != 1) channels_last = false;
    }
  }
  auto block_for = [&](const PlannedValue& v) {
    if (v.where != PlannedValue::Where::kArena || v.dtype != DType::kFloat32 ||
        v.shape.size() != 4) {
      return 0;
    }
    if (channels_last) return static_cast<int>(v.shape[1]);
    // Only whole blocks: the buffer then has the plain size and elementwise kernels need no
    // knowledge of the padding.
    for (int b = block; b >= 8; b /= 2) {
      if (v.shape[1] % b == 0) return b;
    }
    return 0;
  };
  for (size_t n : order_) {
    if (!ctxs[n] || removed[n]) continue;
    const OpContext& ctx = *ctxs[n];
    const Node& node = *ctx.node;
    if (node.outputs.empty() || node.outputs[0] < 0) continue;
    PlannedValue& out = values[static_cast<size_t>(node.outputs[0])];
    if (is_conv(node.op_type)) {
      out.block = block_for(out);
      continue;
    }
    if (blocked_pool(node)) {
      const PlannedValue& in = values[static_cast<size_t>(node.inputs[0])];
      if (in.block > 0 && block_for(out) > 0 && out.shape[1] % in.block == 0) out.block = in.block;
      continue;
    }
    if (!layout_transparent(node.op_type) || node.outputs.size() != 1) continue;
    // Every data input has the output's shape and one block, or is a one-element constant, or
    // (Add, Sub, Mul, Div: the binary kernel's blocked case) holds one value per channel.
    const bool binary = node.op_type == "Add" || node.op_type == "Sub" || node.op_type == "Mul" ||
                        node.op_type == "Div";
    int b = -1, per_channel = 0;
    for (size_t i = 0; i < node.inputs.size() && b != 0; ++i) {
      const int id = node.inputs[i];
      if (id < 0) continue;
      const PlannedValue& in = values[static_cast<size_t>(id)];
      if (in.where == PlannedValue::Where::kConstant && in.constant->numel() == 1) continue;
      if (binary && per_channel == 0 && in.dtype == DType::kFloat32 && in.shape != out.shape &&
          is_channel_vector(in.shape, out.shape)) {
        ++per_channel;
        continue;
      }
      if (in.shape != out.shape || (b >= 0 && in.block != b)) {
        b = 0;
      } else {
        b = in.block;
      }
    }
    if (b > 0 && block_for(out) != 0) out.block = b;
  }
}

}  // namespace tern
