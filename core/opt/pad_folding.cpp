// Pads that cost a copy and need none: a zero constant Pad of the spatial dims read only by a
// Conv or an AveragePool becomes that node's own padding (PyTorch exports avg_pool2d with
// count_include_pad as Pad + AveragePool: Inception's and MaxViT's pools), and a Pad of nothing
// becomes an Identity (the planner runs it in place). Dropout at inference or with ratio 0, its
// mask unread, becomes an Identity too.
#include <algorithm>
#include <optional>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {
namespace {

// The pads of a constant-mode, zero-valued Pad over every dim ([begin..., end...]), when known.
std::optional<std::vector<int64_t>> zero_pads(const Graph& g, const Node& pad) {
  auto mode = pad.attrs.get_string("mode", "constant");
  if (!mode || *mode != "constant") return std::nullopt;
  auto value = pad.attrs.get_float("value", 0.0f);  // opset < 11
  if (!value || *value != 0.0f) return std::nullopt;
  if (pad.inputs.size() > 3 && pad.inputs[3] >= 0) return std::nullopt;  // axes
  if (pad.inputs.size() > 2 && pad.inputs[2] >= 0) {
    const Tensor* v = constant_of(g, pad.inputs[2]);
    if (!v || v->numel() > 1 || (v->numel() == 1 && v->float_at(0) != 0.0)) return std::nullopt;
  }
  std::vector<int64_t> pads;
  if (pad.inputs.size() > 1 && pad.inputs[1] >= 0) {
    const Tensor* p = constant_of(g, pad.inputs[1]);
    if (!p) return std::nullopt;
    for (int64_t i = 0; i < p->numel(); ++i) pads.push_back(p->int_at(i));
  } else {
    auto attr = pad.attrs.get_ints("pads");  // opset < 11
    if (!attr) return std::nullopt;
    pads = *attr;
  }
  if (pads.empty() || pads.size() % 2) return std::nullopt;
  if (std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0; })) return std::nullopt;
  return pads;
}

// Adds the spatial part of `pads` (rank r: [begin..., end...], the first two dims unpadded) to
// the window op's own pads; false when it cannot take them.
bool absorb(Node& op, const std::vector<int64_t>& pads) {
  const size_t r = pads.size() / 2;
  if (r < 3 || pads[0] || pads[1] || pads[r] || pads[r + 1]) return false;
  auto auto_pad = op.attrs.get_string("auto_pad", "NOTSET");
  if (!auto_pad || *auto_pad != "NOTSET") return false;
  const size_t s = r - 2;
  auto own = op.attrs.get_ints("pads", std::vector<int64_t>(2 * s, 0));
  if (!own || own->size() != 2 * s) return false;
  if (op.op_type == "AveragePool") {
    auto ceil = op.attrs.get_int("ceil_mode", 0);
    auto cip = op.attrs.get_int("count_include_pad", 0);
    if (!ceil || !cip || *ceil != 0) return false;
    // The padded zeros were input elements, counted by every window: count_include_pad.
    const bool own_zero = std::all_of(own->begin(), own->end(), [](int64_t v) { return v == 0; });
    if (*cip == 0 && !own_zero) return false;
    op.attrs.set("count_include_pad", Attribute::of_int(1));
  }
  for (size_t i = 0; i < s; ++i) {
    (*own)[i] += pads[2 + i];
    (*own)[s + i] += pads[r + 2 + i];
  }
  op.attrs.set("pads", Attribute::of_ints(*own));
  return true;
}

void make_identity(Node& n, int input, int output) {
  n.op_type = "Identity";
  n.inputs = {input};
  n.outputs = {output};
  n.attrs = Attributes();
}

}  // namespace

Status fold_pads(Graph& g, OptimizerReport* report) {
  // (a selective build without either)
  if (!op_built(OptOp::kPad) && !op_built(OptOp::kDropout)) return Status::ok();
  PatternView pv{g};
  const bool identity = op_built("Identity");  // a selective build may leave it out
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (!n.domain.empty() || n.inputs.empty() || n.outputs.empty() || n.outputs[0] < 0) continue;
    if (n.op_type == "Dropout") {
      const bool mask_read = n.outputs.size() > 1 && n.outputs[1] >= 0 &&
                             (pv.is_output[static_cast<size_t>(n.outputs[1])] ||
                              !pv.consumers[static_cast<size_t>(n.outputs[1])].empty());
      const Tensor* training =
          n.inputs.size() > 2 && n.inputs[2] >= 0 ? constant_of(g, n.inputs[2]) : nullptr;
      const bool inference = n.inputs.size() <= 2 || n.inputs[2] < 0 ||
                             (training && training->numel() == 1 && training->int_at(0) == 0);
      // A ratio of 0 drops nothing, in training mode too (exporters leave such Dropouts behind).
      const Tensor* ratio =
          n.inputs.size() > 1 && n.inputs[1] >= 0 ? constant_of(g, n.inputs[1]) : nullptr;
      const bool drops_nothing = ratio && ratio->numel() == 1 &&
                                 ratio->dtype() == DType::kFloat32 && *ratio->data<float>() == 0.0f;
      if (identity && !mask_read && (inference || drops_nothing)) {
        make_identity(n, n.inputs[0], n.outputs[0]);
        ++report->pads_folded;
      }
      continue;
    }
    if (n.op_type != "Pad") continue;
    auto pads = zero_pads(g, n);
    if (!pads) continue;
    if (std::all_of(pads->begin(), pads->end(), [](int64_t v) { return v == 0; })) {
      if (!identity) continue;
      make_identity(n, n.inputs[0], n.outputs[0]);
      ++report->pads_folded;
      continue;
    }
    const auto readers = pv.consumers[static_cast<size_t>(n.outputs[0])];
    if (readers.size() != 1 || pv.is_output[static_cast<size_t>(n.outputs[0])]) continue;
    Node& reader = g.nodes[readers[0]];
    if (!reader.domain.empty() || reader.inputs.empty() || reader.inputs[0] != n.outputs[0] ||
        (reader.op_type != "Conv" && reader.op_type != "AveragePool")) {
      continue;
    }
    if (!absorb(reader, *pads)) continue;
    reader.inputs[0] = n.inputs[0];
    pv.removed[i] = true;
    ++report->pads_folded;
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

}  // namespace tern
