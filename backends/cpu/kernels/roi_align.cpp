// RoiAlign on the CPU (float32): each region's samples (neighbour offsets and weights, the same for
// every channel) are computed once, then every channel of the region is interpolated from them;
// regions and channel blocks run on the intra-op threads.
#include <algorithm>
#include <limits>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/roi_align.h"

namespace tern {
namespace {

constexpr int64_t kChannelBlock = 16;  // channels per work item

Status run_roi_align(const ops::RoiAlignParams& p, const KernelArgs& a, const ExecContext& exec) {
  const float* X = a.inputs[0]->data<float>();
  const float* R = a.inputs[1]->data<float>();
  const Tensor& I = *a.inputs[2];
  float* Y = a.outputs[0]->data<float>();
  for (int64_t r = 0; r < p.rois; ++r) {
    const int64_t b = I.int_at(r);
    if (b < 0 || b >= p.batch) {
      return invalid_argument("batch_indices[", r, "] is ", b, ", outside 0..", p.batch - 1);
    }
  }
  const int64_t plane = p.height * p.width, bins = p.out_h * p.out_w;
  const int64_t blocks = (p.channels + kChannelBlock - 1) / kChannelBlock;
  parallel_for(p.rois * blocks, 1, exec.num_threads, [&](int64_t t0, int64_t t1) {
    std::vector<ops::RoiSample> samples;
    int64_t sampled_roi = -1, count = 1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / blocks, c0 = (t % blocks) * kChannelBlock;
      const int64_t c1 = std::min(p.channels, c0 + kChannelBlock);
      if (r != sampled_roi) {
        samples = ops::roi_samples(p, R + r * 4, &count);
        sampled_roi = r;
      }
      const auto per_bin = static_cast<int64_t>(samples.size()) / bins;
      const float inv = 1.0f / static_cast<float>(count);
      const int64_t b = I.int_at(r);
      for (int64_t c = c0; c < c1; ++c) {
        const float* x = X + (b * p.channels + c) * plane;
        float* y = Y + (r * p.channels + c) * bins;
        const ops::RoiSample* s = samples.data();
        for (int64_t bin = 0; bin < bins; ++bin) {
          if (p.max_mode) {
            float m = per_bin ? -std::numeric_limits<float>::infinity() : 0.0f;
            for (int64_t k = 0; k < per_bin; ++k, ++s) {
              m = std::max(
                  {m, s->w1 * x[s->o1], s->w2 * x[s->o2], s->w3 * x[s->o3], s->w4 * x[s->o4]});
            }
            y[bin] = m;
          } else {
            float acc = 0;
            for (int64_t k = 0; k < per_bin; ++k, ++s) {
              acc += s->w1 * x[s->o1] + s->w2 * x[s->o2] + s->w3 * x[s->o3] + s->w4 * x[s->o4];
            }
            y[bin] = acc * inv;
          }
        }
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_roi_align(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return unsupported("roi_align takes float32");
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::RoiAlignParams p, ops::parse_roi_align(ctx));
  return make_kernel("roi_align", p, run_roi_align);
}

}  // namespace

TERN_REGISTRATION void register_cpu_roi_align(KernelRegistry& r) {
  r.add("RoiAlign", "cpu", DType::kFloat32, make_roi_align);
}

}  // namespace tern
