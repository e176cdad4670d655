// FusedConv's steps without exponentials, applied in a convolution tile's registers (conv_stem,
// conv_depthwise): which steps of an epilogue go there. The tiles apply them with
// conv_reg_epilogue.inc.
#pragma once

#include <vector>

#include "ops/fused_conv.h"

namespace tern {

// v = act(v): Relu max(v, 0); LeakyRelu v < 0 ? a v : v; Clip min(b, max(a, v)); HardSigmoid
// min(1, max(0, a v + b)); HardSwish v min(1, max(0, v / 6 + 1/2)); Affine a v + b.
struct RegStep {
  ops::FusedAct act;
  float a = 0, b = 0;
};

// `epilogue` as register steps, or empty where one of its steps needs an exponential (Sigmoid,
// Tanh, Swish): then all of them run after the tiles, on the vector primitives (fused_steps.h).
inline std::vector<RegStep> reg_steps_of(const std::vector<ops::FusedStep>& epilogue) {
  std::vector<RegStep> regs;
  for (const ops::FusedStep& st : epilogue) {
    const std::vector<float>& q = st.params;
    switch (st.act) {
      case ops::FusedAct::kRelu:
      case ops::FusedAct::kHardSwish:
        regs.push_back({st.act});
        break;
      case ops::FusedAct::kLeakyRelu:
        regs.push_back({st.act, q[0]});
        break;
      case ops::FusedAct::kClip:
      case ops::FusedAct::kHardSigmoid:
      case ops::FusedAct::kAffine:
        regs.push_back({st.act, q[0], q[1]});
        break;
      default:  // Sigmoid, Tanh, Swish
        return {};
    }
  }
  return regs;
}

}  // namespace tern
