// ReorderToPlain (Tern-internal, inserted by the planner): copies a channel-blocked rank-4 tensor
// (nChwBc, B = the input's block, channels a multiple of B) into the plain NCHW layout, at the edge
// where a blocked convolution chain meets an op that needs plain data.
#include <cstring>

#include "core/op_registry.h"
#include "core/parallel.h"

namespace tern {
namespace {

struct ReorderParams {
  int64_t n = 0, c = 0, hw = 0;
  int block = 0;
  size_t elem = 4;
};

Status infer_reorder(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_reorder(const ReorderParams& p, const KernelArgs& a, const ExecContext& exec) {
  const auto* src = static_cast<const uint8_t*>(a.inputs[0]->raw());
  auto* dst = static_cast<uint8_t*>(a.outputs[0]->raw());
  if (p.block == 0) {
    std::memcpy(dst, src, static_cast<size_t>(p.n * p.c * p.hw) * p.elem);
    return Status::ok();
  }
  const int64_t B = p.block, cb = p.c / B;
  // One (image, channel block) per task: reads B * hw contiguous floats, writes B planes.
  parallel_for(p.n * cb, 1, exec.num_threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* s = reinterpret_cast<const float*>(src) + t * B * p.hw;
      const int64_t n = t / cb, c0 = (t % cb) * B;
      float* d = reinterpret_cast<float*>(dst) + (n * p.c + c0) * p.hw;
      for (int64_t i = 0; i < p.hw; ++i) {
        for (int64_t b = 0; b < B; ++b) d[b * p.hw + i] = s[i * B + b];
      }
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_reorder(const OpContext& ctx) {
  const TensorInfo& x = ctx.inputs[0];
  ReorderParams p;
  p.block = x.block;
  p.elem = dtype_size(x.dtype);
  if (p.block != 0) {
    if (x.shape.size() != 4 || x.dtype != DType::kFloat32 || x.shape[1] % p.block != 0) {
      return invalid_argument(ctx.where, ": a blocked layout needs a float32 rank-4 tensor whose ",
                              "channels are a multiple of ", p.block, ", got ",
                              dtype_name(x.dtype), shape_str(x.shape));
    }
  }
  TERN_ASSIGN_OR_RETURN(int64_t numel, checked_numel(x.shape));
  if (x.shape.size() == 4) {
    p.n = x.shape[0];
    p.c = x.shape[1];
    p.hw = x.shape[2] * x.shape[3];
  } else {
    p.n = 1;
    p.c = 1;
    p.hw = numel;
  }
  return make_kernel("reorder", p, run_reorder);
}

}  // namespace

void register_op_layout(OpRegistry& r) {
  r.add({"ReorderToPlain", 1, 1, 1, 1, infer_reorder, make_reorder, {}});
}

}  // namespace tern
