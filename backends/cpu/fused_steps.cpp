#include "backends/cpu/fused_steps.h"

#include <algorithm>

namespace tern {

void apply_fused_steps(const VecOps& v, const std::vector<ops::FusedStep>& steps, float* y,
                       int64_t n) {
  constexpr int64_t kRun = 4096;
  for (int64_t i0 = 0; i0 < n; i0 += kRun) {
    float* x = y + i0;
    const int64_t m = std::min(kRun, n - i0);
    for (const ops::FusedStep& st : steps) {
      switch (st.act) {
        case ops::FusedAct::kSigmoid:
          v.sigmoid(x, x, m);
          break;
        case ops::FusedAct::kTanh:
          v.tanh(x, x, m);
          break;
        case ops::FusedAct::kSwish:
          v.activation(static_cast<int>(Activation::kSwish), st.params[0], x, x, m);
          break;
        case ops::FusedAct::kAffine:
          v.affine(x, st.params[0], st.params[1], x, m);
          break;
        default:  // Relu, LeakyRelu, Clip, HardSigmoid, HardSwish: no exponentials
          ops::apply_step(st, x, m);
      }
    }
  }
}

}  // namespace tern
