#include "core/plan/layout.h"

namespace tern {

bool reads_blocked(const Backend& backend, const Node& node, int output_block) {
  const LayoutRole role = backend.layout_role(node);
  return output_block > 0 || role == LayoutRole::kConvolution || role == LayoutRole::kReadsBlocked;
}

void choose_layouts(PlanGraph& pg, const std::vector<Backend*>& backends) {
  // The layout the first host backend's convolutions want; none with a device in the session.
  const Backend* host = nullptr;
  for (Backend* b : backends) {
    if (!b->is_host()) return;
    if (!host) host = b;
  }
  if (!host) return;
  std::vector<Backend::ConvSite> convs;
  for (size_t n : *pg.order) {
    if (!pg.ctxs[n] || pg.removed[n]) continue;
    const Node& node = *pg.ctxs[n]->node;
    if (host->layout_role(node) != LayoutRole::kConvolution) continue;
    Backend::ConvSite site{&node, 0, 0};
    auto channels = [&](int v) -> int64_t {
      if (v < 0) return 0;
      const PlannedValue& pv = pg.value(v);
      return pv.shape.size() >= 2 ? pv.shape[1] : 0;
    };
    if (!node.inputs.empty()) site.in_channels = channels(node.inputs[0]);
    if (!node.outputs.empty() && node.outputs[0] >= 0) {
      site.out_channels = channels(node.outputs[0]);
      const Shape& y = pg.value(node.outputs[0]).shape;
      site.out_pixels = y.size() >= 2 ? numel(Shape(y.begin() + 2, y.end())) : 0;
    }
    convs.push_back(site);
  }
  if (convs.empty()) return;
  const int layout = host->conv_layout(*pg.flags, convs);
  if (layout == 0) return;
  const bool channels_last = layout == Backend::kChannelsLast;
  auto block_for = [&](const PlannedValue& v) {
    if (v.where != PlannedValue::Where::kArena || v.shape.size() != 4) return 0;
    // int8 activations (between QLinearConvs): channels-last, what oneDNN's int8 kernels read.
    if (v.dtype == DType::kUInt8 || v.dtype == DType::kInt8) return static_cast<int>(v.shape[1]);
    if (v.dtype != DType::kFloat32) return 0;
    if (channels_last) return static_cast<int>(v.shape[1]);
    // Only whole blocks: the buffer then has the plain size and element-wise kernels need no
    // knowledge of the padding.
    for (int b = layout; b >= 8; b /= 2) {
      if (v.shape[1] % b == 0) return b;
    }
    return 0;
  };
  for (size_t n : *pg.order) {
    if (!pg.ctxs[n] || pg.removed[n]) continue;
    const Node& node = *pg.ctxs[n]->node;
    if (node.outputs.empty() || node.outputs[0] < 0) continue;
    PlannedValue& out = pg.value(node.outputs[0]);
    const LayoutRole role = pg.is_plain_only(n) ? LayoutRole::kPlain : host->layout_role(node);
    if (role == LayoutRole::kConvolution) {
      out.block = block_for(out);
      continue;
    }
    if (role == LayoutRole::kWritesBlocked) {
      const int id = node.inputs.empty() ? -1 : node.inputs[0];
      if (id >= 0 && pg.value(id).block == 0) out.block = block_for(out);
      continue;
    }
    if (role == LayoutRole::kJoinsChannels) {
      // Every input blocked alike by 8 or 16 with whole blocks (in nChw{b}c an input's channels
      // are one run per image: the joined tensor is those runs in turn), or every input
      // channels-last (the joined tensor is each pixel's channels in turn).
      int b = 0;
      bool blocks = out.shape.size() == 4 && block_for(out) > 0, pixels = blocks;
      for (size_t i = 0; (blocks || pixels) && i < node.inputs.size(); ++i) {
        const int id = node.inputs[i];
        const PlannedValue* in = id < 0 ? nullptr : &pg.value(id);
        if (!in || in->shape.size() != 4) {
          blocks = pixels = false;
          break;
        }
        blocks = blocks && (in->block == 8 || in->block == 16) && (b == 0 || in->block == b) &&
                 in->shape[1] % in->block == 0;
        pixels = pixels && in->block > 0 && in->block == in->shape[1];
        b = in->block;
      }
      if (blocks && out.shape[1] % b == 0) {
        out.block = b;
      } else if (pixels && block_for(out) == out.shape[1]) {
        out.block = static_cast<int>(out.shape[1]);
      }
      continue;
    }
    if (role == LayoutRole::kKeepsBlock) {
      const PlannedValue& in = pg.value(node.inputs[0]);
      if (in.block > 0 && block_for(out) > 0 && out.shape[1] % in.block == 0) out.block = in.block;
      continue;
    }
    if ((role != LayoutRole::kElementwise && role != LayoutRole::kElementwiseRows) ||
        node.outputs.size() != 1) {
      continue;
    }
    // Every data input has the output's shape and one block, or is a one-element constant, or
    // (kElementwiseRows) holds one value per channel.
    int b = -1, per_channel = 0;
    for (size_t i = 0; i < node.inputs.size() && b != 0; ++i) {
      const int id = node.inputs[i];
      if (id < 0) continue;
      const PlannedValue& in = pg.value(id);
      if (in.where == PlannedValue::Where::kConstant && in.constant->numel() == 1) continue;
      if (role == LayoutRole::kElementwiseRows && per_channel == 0 && in.dtype == DType::kFloat32 &&
          in.shape != out.shape && is_channel_vector(in.shape, out.shape)) {
        ++per_channel;
        continue;
      }
      b = in.shape != out.shape || (b >= 0 && in.block != b) ? 0 : in.block;
    }
    if (b > 0 && block_for(out) != 0) out.block = b;
  }
}

}  // namespace tern
