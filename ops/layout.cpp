// ReorderToPlain (Tern-internal, inserted by the planner): copies a channel-blocked rank-4 tensor
// (nChwBc, B = the input's block, channels a multiple of B; B = C is channels-last) into the plain
// NCHW layout, at the edge where a blocked convolution chain meets an op that needs plain data.
// float32, and the 8-bit activations of int8 convolution chains.
#include <algorithm>

#include "core/op_registry.h"
#include "core/parallel.h"

namespace tern {
namespace {

struct ReorderParams {
  int64_t n = 0, c = 0, hw = 0;
  int block = 0;
};

Status infer_reorder(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  return Status::ok();
}

template <class T>
Status run_reorder(const ReorderParams& p, const KernelArgs& a, const ExecContext& exec) {
  const T* src = static_cast<const T*>(a.inputs[0]->raw());
  T* dst = static_cast<T*>(a.outputs[0]->raw());
  const int64_t B = p.block, cb = p.c / B;
  // Tiles of pixels: a tile's B * kTile source floats stay in L1 while each of its B channel rows
  // is written contiguously (writing one float per plane per pixel thrashed the caches).
  constexpr int64_t kTile = 64;
  const int64_t tiles = (p.hw + kTile - 1) / kTile;
  parallel_for(p.n * cb * tiles, std::max<int64_t>(1, 4096 / (B * kTile)), exec.num_threads,
               [&](int64_t begin, int64_t end) {
                 for (int64_t t = begin; t < end; ++t) {
                   const int64_t blk = t / tiles, i0 = (t % tiles) * kTile;
                   const int64_t i1 = std::min(p.hw, i0 + kTile);
                   const T* s = src + blk * B * p.hw;
                   const int64_t n = blk / cb, c0 = (blk % cb) * B;
                   T* d = dst + (n * p.c + c0) * p.hw;
                   for (int64_t b = 0; b < B; ++b) {
                     T* row = d + b * p.hw;
                     for (int64_t i = i0; i < i1; ++i) row[i] = s[i * B + b];
                   }
                 }
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_reorder(const OpContext& ctx) {
  const TensorInfo& x = ctx.inputs[0];
  const bool bytes = x.dtype == DType::kUInt8 || x.dtype == DType::kInt8;
  if (x.block <= 0 || x.shape.size() != 4 || (x.dtype != DType::kFloat32 && !bytes) ||
      x.shape[1] % x.block != 0) {
    return invalid_argument(ctx.where,
                            ": ReorderToPlain takes a float32 or 8-bit rank-4 tensor whose ",
                            "channels are blocked by a divisor of their count, got ",
                            dtype_name(x.dtype), shape_str(x.shape), " with block ", x.block);
  }
  ReorderParams p{x.shape[0], x.shape[1], x.shape[2] * x.shape[3], x.block};
  if (bytes) return make_kernel("reorder", p, run_reorder<uint8_t>);
  return make_kernel("reorder", p, run_reorder<float>);
}

}  // namespace

TERN_REGISTRATION void register_op_layout(OpRegistry& r) {
  r.add({"ReorderToPlain", 1, 1, 1, 1, infer_reorder, make_reorder, {}, attrs({})});
}

}  // namespace tern
