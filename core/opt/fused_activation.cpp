#include "core/opt/fused_activation.h"

#include <limits>

#include "core/opt/graph_util.h"

namespace tern {

void append_fused_activation(Node& conv, const FusedActivation& act) {
  const Attribute* kinds = conv.attrs.find("activations");
  const Attribute* params = conv.attrs.find("activation_params");
  Attribute k, p;
  k.kind = Attribute::Kind::kStrings;
  p.kind = Attribute::Kind::kFloats;
  if (kinds && params) {
    k = *kinds;
    p = *params;
  }
  if (act.kind == "Affine" && !k.strings.empty() && k.strings.back() == "Affine" &&
      p.floats.size() >= 2) {
    // (x * s1 + b1) * s2 + b2 = x * (s1 * s2) + (b1 * s2 + b2)
    float& s1 = p.floats[p.floats.size() - 2];
    float& b1 = p.floats[p.floats.size() - 1];
    b1 = b1 * act.params[0] + act.params[1];
    s1 = s1 * act.params[0];
  } else {
    k.strings.push_back(act.kind);
    p.floats.insert(p.floats.end(), act.params.begin(), act.params.end());
  }
  conv.attrs.set("activations", k);
  conv.attrs.set("activation_params", p);
}

bool has_epilogue(const Node& conv) {
  const Attribute* kinds = conv.attrs.find("activations");
  return kinds && !kinds->strings.empty();
}

std::optional<FusedActivation> activation_of(const Graph& g, const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return std::nullopt;
  const std::string& op = n.op_type;
  if ((op == "Mul" || op == "Add") && n.inputs.size() == 2) {
    // By a float scalar constant, on either side: x * s or x + b.
    for (int side = 0; side < 2; ++side) {
      const int operand = n.inputs[static_cast<size_t>(1 - side)];
      const Tensor* c = constant_of(g, operand);
      const std::optional<float> s = scalar_of(g, operand);
      if (!s || n.inputs[side] < 0) continue;
      const float v = *s;
      return FusedActivation{
          "Affine", op == "Mul" ? std::vector<float>{v, 0.0f} : std::vector<float>{1.0f, v}, side,
          c->rank()};
    }
    return std::nullopt;
  }
  if (op == "Relu" || op == "Sigmoid" || op == "HardSwish" || op == "Tanh") {
    return FusedActivation{op, {}};
  }
  if (op == "Swish") {
    auto alpha = n.attrs.get_float("alpha", 1.0f);
    if (!alpha) return std::nullopt;
    return FusedActivation{op, {*alpha}};
  }
  if (op == "LeakyRelu") {
    auto alpha = n.attrs.get_float("alpha", 0.01f);
    if (!alpha) return std::nullopt;
    return FusedActivation{op, {*alpha}};
  }
  if (op == "HardSigmoid") {
    auto alpha = n.attrs.get_float("alpha", 0.2f);
    auto beta = n.attrs.get_float("beta", 0.5f);
    if (!alpha || !beta) return std::nullopt;
    return FusedActivation{op, {*alpha, *beta}};
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
    if (g.opset < 11) {
      auto a = n.attrs.get_float("min", lo);
      auto b = n.attrs.get_float("max", hi);
      if (!a || !b) return std::nullopt;
      lo = *a;
      hi = *b;
    } else {
      for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
        if (n.inputs[i] < 0) continue;
        auto s = scalar_of(g, n.inputs[i]);
        if (!s) return std::nullopt;
        (i == 1 ? lo : hi) = *s;
      }
    }
    return FusedActivation{op, {lo, hi}};
  }
  return std::nullopt;
}

}  // namespace tern
