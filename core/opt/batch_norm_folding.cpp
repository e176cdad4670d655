// Conv -> BatchNormalization (inference form) becomes one Conv with scaled weights and bias.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

Status fold_batch_norm_into_conv(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kBatchNormalization)) return Status::ok();  // a selective build without it
  auto consumers = value_consumers(g);
  auto producers = value_producers(g);
  auto is_output = graph_output_mask(g);
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t b = 0; b < g.nodes.size(); ++b) {
    Node& bn = g.nodes[b];
    if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || !bn.domain.empty()) continue;
    if (std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](int id) { return id >= 0; })) {
      continue;  // training-mode statistics are wanted
    }
    auto training = bn.attrs.get_int("training_mode", 0);
    auto eps = bn.attrs.get_float("epsilon", 1e-5f);
    if (!training || *training != 0 || !eps) continue;
    const int x = bn.inputs[0];
    const int c = producers[static_cast<size_t>(x)];
    if (c < 0 || removed[static_cast<size_t>(c)]) continue;
    Node& conv = g.nodes[static_cast<size_t>(c)];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs[0] != x ||
        !only_read_by(consumers, is_output, x, b)) {
      continue;
    }
    const Tensor* w = constant_of(g, conv.inputs[1]);
    const Tensor* bias = conv.inputs.size() > 2 ? constant_of(g, conv.inputs[2]) : nullptr;
    if (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !bias) continue;
    const Tensor* p[4];
    bool ok = w && w->dtype() == DType::kFloat32 && w->rank() >= 3;
    const int64_t m = ok ? w->shape()[0] : 0;
    for (int i = 0; i < 4 && ok; ++i) {
      p[i] = constant_of(g, bn.inputs[static_cast<size_t>(i) + 1]);
      ok = p[i] && p[i]->dtype() == DType::kFloat32 && p[i]->numel() == m;
    }
    if (!ok || (bias && (bias->dtype() != DType::kFloat32 || bias->numel() != m))) continue;
    TERN_ASSIGN_OR_RETURN(Tensor nw, Tensor::allocate(DType::kFloat32, w->shape()));
    TERN_ASSIGN_OR_RETURN(Tensor nb, Tensor::allocate(DType::kFloat32, {m}));
    const int64_t per = w->numel() / std::max<int64_t>(m, 1);
    const float* scale = p[0]->data<float>();
    const float* shift = p[1]->data<float>();
    const float* mean = p[2]->data<float>();
    const float* var = p[3]->data<float>();
    for (int64_t o = 0; o < m; ++o) {
      const double s =
          static_cast<double>(scale[o]) / std::sqrt(static_cast<double>(var[o]) + *eps);
      for (int64_t k = 0; k < per; ++k) {
        nw.data<float>()[o * per + k] = static_cast<float>(w->data<float>()[o * per + k] * s);
      }
      const double b0 = bias ? bias->data<float>()[o] : 0.0;
      nb.data<float>()[o] = static_cast<float>((b0 - mean[o]) * s + shift[o]);
    }
    const std::string base = conv.name.empty() ? g.values[static_cast<size_t>(x)].name : conv.name;
    int wid = add_constant(g, base + "/bn_folded_weight", std::move(nw));
    int bid = add_constant(g, base + "/bn_folded_bias", std::move(nb));
    conv.inputs.resize(3);
    conv.inputs[1] = wid;
    conv.inputs[2] = bid;
    conv.outputs[0] = bn.outputs[0];
    removed[b] = true;
    ++report->batch_norms_folded;
  }
  erase_nodes(g, removed);
  return Status::ok();
}

}  // namespace tern
