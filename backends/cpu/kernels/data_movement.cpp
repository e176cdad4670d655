// Data movement on the CPU, any dtype of 1, 2, 4 or 8 bytes, plain layouts: Transpose, Slice,
// DepthToSpace/SpaceToDepth (strided copies), Concat and Split (row copies), Gather and GatherND
// (row gathers).
//
// A strided copy writes its output in order and reads the input at per-dim strides (a Transpose's
// permuted strides, a Slice's stepped ones from its start). Axes of size 1 are dropped and output
// axes that stay adjacent in the input are merged, so the attention layouts ([B, S, H, D] <->
// [B, H, S, D]) become a copy of D-element rows, a 2-D transpose one gather, and a Slice of the
// last axis one copy per row. Each work item walks its rows with a running offset (no division per
// row); rows that are contiguous in the input are copied whole. The blocked cases: NCHW -> NHWC
// (perm [0, 2, 3, 1], ConvNeXt's and Swin's hand-over from a convolution to per-pixel layers)
// reads a channel-blocked or channels-last input directly, and NHWC -> NCHW (perm [0, 3, 1, 2],
// the way back) writes one, as runs of a block's channels per pixel.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/slice.h"

namespace tern {
namespace {

// Elements per work item: a copy of less (256 KiB of floats) is not worth waking a second thread.
constexpr int64_t kGrainElements = 65536;

struct StridedCopy {
  std::vector<int64_t> dims;     // merged output dims, the last one the row
  std::vector<int64_t> strides;  // input element stride of each merged output dim
  int64_t base = 0;              // input element offset of the first output element
  size_t esize = 0;
  int64_t rows = 1;
};

// The copy of the output `dims` (in order) from input elements at `strides`, from `base`.
StridedCopy plan_strided_copy(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                              int64_t base, size_t esize) {
  StridedCopy p;
  p.base = base;
  p.esize = esize;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!p.dims.empty() && p.strides.back() == dims[d] * strides[d]) {  // adjacent: merge
      p.dims.back() *= dims[d];
      p.strides.back() = strides[d];
    } else {
      p.dims.push_back(dims[d]);
      p.strides.push_back(strides[d]);
    }
  }
  if (p.dims.empty()) {
    p.dims = {1};
    p.strides = {1};
  }
  for (size_t d = 0; d + 1 < p.dims.size(); ++d) p.rows *= p.dims[d];
  return p;
}

template <class T>
void gather(const T* in, int64_t stride, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i * stride];
}

void gather_row(const uint8_t* in, int64_t step, int64_t n, size_t esize, uint8_t* o) {
  if (step == 1) {
    std::memcpy(o, in, static_cast<size_t>(n) * esize);
  } else if (esize == 4) {
    gather(reinterpret_cast<const uint32_t*>(in), step, n, reinterpret_cast<uint32_t*>(o));
  } else if (esize == 8) {
    gather(reinterpret_cast<const uint64_t*>(in), step, n, reinterpret_cast<uint64_t*>(o));
  } else if (esize == 2) {
    gather(reinterpret_cast<const uint16_t*>(in), step, n, reinterpret_cast<uint16_t*>(o));
  } else {
    gather(in, step, n, o);
  }
}

void run_strided_copy(const StridedCopy& p, const void* src_v, void* dst_v, int threads) {
  const auto* src = static_cast<const uint8_t*>(src_v);
  auto* dst = static_cast<uint8_t*>(dst_v);
  const size_t outer = p.dims.size() - 1;
  const int64_t inner = p.dims.back(), step = p.strides.back();
  parallel_for(p.rows, std::max<int64_t>(1, kGrainElements / inner), threads,
               [&](int64_t r0, int64_t r1) {
                 // The running position of row r0 in the outer dims, and its input offset.
                 std::vector<int64_t> pos(outer, 0);
                 int64_t off = p.base;
                 for (int64_t rem = r0, d = static_cast<int64_t>(outer) - 1; d >= 0; --d) {
                   pos[static_cast<size_t>(d)] = rem % p.dims[static_cast<size_t>(d)];
                   rem /= p.dims[static_cast<size_t>(d)];
                   off += pos[static_cast<size_t>(d)] * p.strides[static_cast<size_t>(d)];
                 }
                 for (int64_t row = r0; row < r1; ++row) {
                   gather_row(src + off * static_cast<int64_t>(p.esize), step, inner, p.esize,
                              dst + static_cast<size_t>(row * inner) * p.esize);
                   for (size_t d = outer; d-- > 0;) {  // next row
                     off += p.strides[d];
                     if (++pos[d] < p.dims[d]) break;
                     off -= pos[d] * p.strides[d];
                     pos[d] = 0;
                   }
                 }
               });
}

Status run_copy_kernel(const StridedCopy& p, const KernelArgs& a, const ExecContext& exec) {
  if (a.outputs[0]->numel() == 0) return Status::ok();
  run_strided_copy(p, a.inputs[0]->raw(), a.outputs[0]->raw(), exec.num_threads);
  return Status::ok();
}

// What every kernel here needs: a plain layout and an element of 1, 2, 4 or 8 bytes.
Status check_movable(const OpContext& ctx, const char* what) {
  const size_t es = dtype_size(ctx.inputs[0].dtype);
  if (ctx.inputs[0].dtype == DType::kString || (es != 1 && es != 2 && es != 4 && es != 8)) {
    return unsupported(what, ": element size ", es);
  }
  return ops::require_plain_layout(ctx);
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// ---- Transpose ----------------------------------------------------------------------------------

struct ChannelRuns {
  int64_t n, c, pixels, block;
};

// NCHW <-> NHWC between a channel-blocked (or channels-last) tensor and a plain NHWC one: per
// pixel, runs of `block` channels; kToBlocked picks the direction.
template <bool kToBlocked>
Status run_channel_runs(const ChannelRuns& p, const KernelArgs& a, const ExecContext& exec) {
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const int64_t blocks = p.c / p.block;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(p.c, 1));
  parallel_for(p.n * p.pixels, grain, exec.num_threads, [&](int64_t b, int64_t e) {
    while (b < e) {  // pixels [b, end) of one image
      const int64_t image = b / p.pixels, p0 = b % p.pixels;
      const int64_t p1 = std::min(p.pixels, p0 + (e - b));
      for (int64_t cb = 0; cb < blocks; ++cb) {
        const int64_t blocked = ((image * blocks + cb) * p.pixels + p0) * p.block;
        const int64_t nhwc = (image * p.pixels + p0) * p.c + cb * p.block;
        const float* src = x + (kToBlocked ? nhwc : blocked);
        float* dst = y + (kToBlocked ? blocked : nhwc);
        const int64_t src_step = kToBlocked ? p.c : p.block, dst_step = kToBlocked ? p.block : p.c;
        for (int64_t px = p0; px < p1; ++px, src += src_step, dst += dst_step) {
          std::memcpy(dst, src, static_cast<size_t>(p.block) * sizeof(float));
        }
      }
      b += p1 - p0;
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_transpose(const OpContext& ctx) {
  if (ctx.outputs[0].block > 0) {
    // NHWC -> NCHW into the planned layout (LayoutRole::kWritesBlocked for this perm).
    auto perm = ctx.attrs().get_ints("perm", {});
    const Shape& in = ctx.inputs[0].shape;
    const int blk = ctx.outputs[0].block;
    if (!perm || *perm != std::vector<int64_t>{0, 3, 1, 2} || in.size() != 4 ||
        ctx.inputs[0].dtype != DType::kFloat32 || ctx.inputs[0].block != 0 || in[3] % blk != 0) {
      return unsupported(
          "transpose_cpu writes a blocked output only for perm [0, 3, 1, 2] of a "
          "plain float32 input");
    }
    return make_kernel("transpose_nhwc_blocked", ChannelRuns{in[0], in[3], in[1] * in[2], blk},
                       run_channel_runs<true>);
  }
  if (ctx.inputs[0].block > 0) {
    // NCHW -> NHWC from a blocked or channels-last input (CpuBackend::layout_role gives this perm
    // LayoutRole::kReadsBlocked); any other blocked case is declined and planned on plain data.
    auto perm = ctx.attrs().get_ints("perm", {});
    const Shape& in = ctx.inputs[0].shape;
    if (!perm || *perm != std::vector<int64_t>{0, 2, 3, 1} || in.size() != 4 ||
        ctx.inputs[0].dtype != DType::kFloat32 || ctx.outputs[0].block != 0 ||
        in[1] % ctx.inputs[0].block != 0) {
      return unsupported(
          "transpose_cpu reads a blocked input only for perm [0, 2, 3, 1] of "
          "float32 into a plain output");
    }
    return make_kernel("transpose_blocked_nhwc",
                       ChannelRuns{in[0], in[1], in[2] * in[3], ctx.inputs[0].block},
                       run_channel_runs<false>);
  }
  TERN_RETURN_IF_ERROR(check_movable(ctx, "transpose_cpu"));
  const Shape& in = ctx.inputs[0].shape;
  const int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> reversed(static_cast<size_t>(r));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  TERN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.attrs().get_ints("perm", reversed));
  if (static_cast<int64_t>(perm.size()) != r) return unsupported("bad perm");
  const std::vector<int64_t> in_strides = contiguous_strides(in);
  std::vector<int64_t> dims, strides;
  int64_t last_moved = -1;  // the input axis of the last output dim of size > 1 so far
  bool in_order = true;     // the dims of size > 1 keep their order: the bytes do not move
  for (int64_t d = 0; d < r; ++d) {
    TERN_ASSIGN_OR_RETURN(int64_t a, ops::normalize_axis(perm[static_cast<size_t>(d)], r));
    dims.push_back(in[static_cast<size_t>(a)]);
    strides.push_back(in_strides[static_cast<size_t>(a)]);
    if (in[static_cast<size_t>(a)] != 1) {
      in_order = in_order && a > last_moved;
      last_moved = a;
    }
  }
  // [1, S, E] -> [S, 1, E] (PyTorch's batch-first attention exports): a reshape in disguise.
  if (in_order) return ops::make_bytes_copy();
  return make_kernel("transpose_cpu",
                     plan_strided_copy(dims, strides, 0, dtype_size(ctx.inputs[0].dtype)),
                     run_copy_kernel);
}

// ---- Slice --------------------------------------------------------------------------------------

Expected<std::unique_ptr<Kernel>> make_slice(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_movable(ctx, "strided_copy"));
  TERN_ASSIGN_OR_RETURN(ops::SliceParams s, ops::parse_slice(ctx));
  const std::vector<int64_t> in_strides = contiguous_strides(s.in_shape);
  std::vector<int64_t> strides(s.in_shape.size());
  int64_t base = 0;
  for (size_t d = 0; d < s.in_shape.size(); ++d) {
    strides[d] = in_strides[d] * s.step[d];
    base += s.start[d] * in_strides[d];
  }
  return make_kernel("strided_copy", plan_strided_copy(s.out_shape, strides, base, s.esize),
                     run_copy_kernel);
}

// ---- DepthToSpace / SpaceToDepth ----------------------------------------------------------------

// DepthToSpace as a strided copy: output [N, C, H, b, W, b] from the input's channel
// (bh * b + bw) * C + c (DCR) or c * b * b + bh * b + bw (CRD); SpaceToDepth: output
// [N, b, b, C, H, W] from input [n, c, h * b + bh, w * b + bw]. DepthToSpace's rows are b
// elements long, so it interleaves b input rows of W elements into each output row instead.
struct DepthSpace {
  StridedCopy copy;  // SpaceToDepth
  bool to_space = false;
  int64_t b = 0, w = 0;      // DepthToSpace: block, input width
  int64_t rows = 0;          // output rows of W * b elements: N * C * H * b
  int64_t c = 0, h = 0;      // output channels, input height
  int64_t channel_step = 0;  // input elements between the bw = 0, 1, ... channels
  int64_t bh_step = 0;       // input elements between the bh = 0, 1, ... channels
  int64_t c_step = 0;        // input elements between consecutive output channels
  size_t esize = 0;
};

template <class T>
void interleave(const DepthSpace& p, const T* x, T* y, int64_t r0, int64_t r1) {
  const int64_t hw = p.h * p.w, row_len = p.w * p.b;
  for (int64_t r = r0; r < r1; ++r) {  // r = ((n * C + c) * H + h) * b + bh
    const int64_t bh = r % p.b, h = (r / p.b) % p.h, c = (r / (p.b * p.h)) % p.c,
                  n = r / (p.b * p.h * p.c);
    const T* src = x + n * p.c * p.b * p.b * hw + c * p.c_step + bh * p.bh_step + h * p.w;
    T* dst = y + r * row_len;
    for (int64_t bw = 0; bw < p.b; ++bw) {
      const T* s = src + bw * p.channel_step;
      for (int64_t i = 0; i < p.w; ++i) dst[i * p.b + bw] = s[i];
    }
  }
}

Status run_depth_space(const DepthSpace& p, const KernelArgs& a, const ExecContext& exec) {
  if (a.outputs[0]->numel() == 0) return Status::ok();
  if (!p.to_space) {
    run_strided_copy(p.copy, a.inputs[0]->raw(), a.outputs[0]->raw(), exec.num_threads);
    return Status::ok();
  }
  const void* x = a.inputs[0]->raw();
  void* y = a.outputs[0]->raw();
  parallel_for(p.rows, std::max<int64_t>(1, kGrainElements / (p.w * p.b)), exec.num_threads,
               [&](int64_t r0, int64_t r1) {
                 switch (p.esize) {
                   case 1:
                     return interleave(p, static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y),
                                       r0, r1);
                   case 2:
                     return interleave(p, static_cast<const uint16_t*>(x),
                                       static_cast<uint16_t*>(y), r0, r1);
                   case 4:
                     return interleave(p, static_cast<const uint32_t*>(x),
                                       static_cast<uint32_t*>(y), r0, r1);
                   default:
                     return interleave(p, static_cast<const uint64_t*>(x),
                                       static_cast<uint64_t*>(y), r0, r1);
                 }
               });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_depth_space(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_movable(ctx, "depth_space"));
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() != 4) return unsupported("depth_space: 4-D input");
  TERN_ASSIGN_OR_RETURN(int64_t b, ctx.attrs().get_int("blocksize", 0));
  Expected<std::string> mode = ctx.attrs().get_string("mode", "DCR");
  if (!mode) return mode.status();
  if (b < 1) return unsupported("depth_space: blocksize ", b);
  DepthSpace p;
  p.b = b;
  p.esize = dtype_size(ctx.inputs[0].dtype);
  p.to_space = ctx.node->op_type == "DepthToSpace";
  if (p.to_space) {
    if (x[1] % (b * b)) return unsupported("depth_space: channels not divisible by blocksize^2");
    p.c = x[1] / (b * b);
    p.h = x[2];
    p.w = x[3];
    p.rows = x[0] * p.c * p.h * b;
    const int64_t hw = x[2] * x[3];
    if (*mode == "CRD") {  // channel c * b * b + bh * b + bw
      p.c_step = b * b * hw;
      p.bh_step = b * hw;
      p.channel_step = hw;
    } else {  // (bh * b + bw) * C + c
      p.c_step = hw;
      p.bh_step = b * p.c * hw;
      p.channel_step = p.c * hw;
    }
  } else {
    if (x[2] % b || x[3] % b) return unsupported("depth_space: H, W not divisible by blocksize");
    const int64_t c = x[1], h = x[2] / b, w = x[3] / b;
    const std::vector<int64_t> s = contiguous_strides(x);
    p.copy =
        plan_strided_copy({x[0], b, b, c, h, w}, {s[0], s[2], s[3], s[1], b * s[2], b}, 0, p.esize);
  }
  return make_kernel("depth_space", std::move(p), run_depth_space);
}

// ---- Concat / Split -----------------------------------------------------------------------------

// Concat on `axis` and Split on it: `outer` rows of `pieces[i] * inner` elements per input (Concat)
// or output (Split), one whole row of the joined tensor being all pieces side by side.
struct RowPieces {
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> pieces;  // extent of each piece on the axis
  size_t esize = 0;
};

Expected<RowPieces> row_pieces(const OpContext& ctx, const Shape& joined, int64_t axis_attr,
                               const std::vector<const TensorInfo*>& parts) {
  TERN_ASSIGN_OR_RETURN(int64_t axis,
                        ops::normalize_axis(axis_attr, static_cast<int64_t>(joined.size())));
  RowPieces p;
  p.esize = dtype_size(ctx.inputs[0].dtype);
  for (int64_t d = 0; d < axis; ++d) p.outer *= joined[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < joined.size(); ++d) p.inner *= joined[d];
  for (const TensorInfo* t : parts) {
    p.pieces.push_back(t->present ? t->shape[static_cast<size_t>(axis)] : -1);
  }
  return p;
}

// Copies every (row, piece) block between the joined tensor and the pieces, in parallel over
// blocks; `to_joined` is Concat's direction.
void copy_pieces(const RowPieces& p, uint8_t* joined, const std::vector<uint8_t*>& parts,
                 bool to_joined, int threads) {
  const size_t n = p.pieces.size();
  std::vector<size_t> col(n + 1, 0);  // byte offset of each piece within a joined row
  for (size_t i = 0; i < n; ++i) {
    col[i + 1] =
        col[i] + static_cast<size_t>(std::max<int64_t>(p.pieces[i], 0) * p.inner) * p.esize;
  }
  const size_t row = col[n];
  const int64_t blocks = p.outer * static_cast<int64_t>(n);
  const int64_t avg = std::max<int64_t>(1, static_cast<int64_t>(row / p.esize / n));
  parallel_for(blocks, std::max<int64_t>(1, kGrainElements / avg), threads,
               [&](int64_t b0, int64_t b1) {
                 for (int64_t b = b0; b < b1; ++b) {
                   const size_t i = static_cast<size_t>(b % static_cast<int64_t>(n));
                   const int64_t o = b / static_cast<int64_t>(n);
                   const size_t len = col[i + 1] - col[i];
                   if (!parts[i] || len == 0) continue;
                   uint8_t* whole = joined + static_cast<size_t>(o) * row + col[i];
                   uint8_t* piece = parts[i] + static_cast<size_t>(o) * len;
                   if (to_joined) {
                     std::memcpy(whole, piece, len);
                   } else {
                     std::memcpy(piece, whole, len);
                   }
                 }
               });
}

// Concat on the channels of channel-blocked tensors (the planner's kJoinsChannels): of 8- or
// 16-blocked ones, each input a whole number of blocks, per image an input's channels are one
// run of C * H * W floats as in the plain layout (rows: images); of channels-last ones, per pixel
// (rows: pixels, C_i floats each). 0 when the layouts are plain or not one of these.
int joined_layout(const OpContext& ctx, int64_t axis) {
  const TensorInfo& out = ctx.outputs[0];
  if (out.block <= 0 || out.shape.size() != 4 || (axis != 1 && axis != -3)) return 0;
  bool blocks = out.block == 8 || out.block == 16, pixels = out.block == out.shape[1];
  for (const TensorInfo& t : ctx.inputs) {
    if (t.shape.size() != 4) return 0;
    blocks = blocks && t.block == out.block && t.shape[1] % t.block == 0;
    pixels = pixels && t.block == t.shape[1];
  }
  return blocks ? 1 : pixels ? 2 : 0;
}

Expected<std::unique_ptr<Kernel>> make_concat(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  const int joined = joined_layout(ctx, axis);
  if (joined == 0) TERN_RETURN_IF_ERROR(check_movable(ctx, "concat_rows"));
  std::vector<const TensorInfo*> parts;
  for (const TensorInfo& t : ctx.inputs) parts.push_back(&t);
  TERN_ASSIGN_OR_RETURN(RowPieces p, row_pieces(ctx, ctx.outputs[0].shape, axis, parts));
  if (joined == 2) {  // channels-last: a row per pixel
    p.outer *= p.inner;
    p.inner = 1;
  }
  return make_kernel("concat_rows", std::move(p),
                     [](const RowPieces& q, const KernelArgs& a, const ExecContext& exec) {
                       std::vector<uint8_t*> in;
                       for (const Tensor* t : a.inputs) {
                         in.push_back(static_cast<uint8_t*>(const_cast<void*>(t->raw())));
                       }
                       copy_pieces(q, static_cast<uint8_t*>(a.outputs[0]->raw()), in, true,
                                   exec.num_threads);
                       return Status::ok();
                     });
}

Expected<std::unique_ptr<Kernel>> make_split(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_movable(ctx, "split_rows"));
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  std::vector<const TensorInfo*> parts;
  for (const TensorInfo& t : ctx.outputs) {
    if (!t.present) return unsupported("split_rows: an output left out");
    parts.push_back(&t);
  }
  TERN_ASSIGN_OR_RETURN(RowPieces p, row_pieces(ctx, ctx.inputs[0].shape, axis, parts));
  return make_kernel("split_rows", std::move(p),
                     [](const RowPieces& q, const KernelArgs& a, const ExecContext& exec) {
                       std::vector<uint8_t*> out;
                       for (Tensor* t : a.outputs) {
                         out.push_back(t ? static_cast<uint8_t*>(t->raw()) : nullptr);
                       }
                       copy_pieces(q, static_cast<uint8_t*>(const_cast<void*>(a.inputs[0]->raw())),
                                   out, false, exec.num_threads);
                       return Status::ok();
                     });
}

// ---- Gather / GatherND --------------------------------------------------------------------------

// Gather on `axis`: for each of `outer` rows and each index, a block of `inner` elements; GatherND:
// for each index tuple, a block of `inner` elements at the tuple's offset. Indices are checked
// first (an out-of-range one fails the run before anything is written).
struct RowGather {
  bool nd = false;
  int64_t outer = 1, dim = 1, inner = 1;
  std::vector<int64_t> nd_dims, nd_strides;  // GatherND: the indexed dims and their strides
  size_t esize = 0;
};

Status run_gather_rows(const RowGather& p, const KernelArgs& a, const ExecContext& exec) {
  const Tensor& idx = *a.inputs[1];
  const int64_t k = p.nd ? static_cast<int64_t>(p.nd_dims.size()) : 1;
  const int64_t n = idx.numel() / std::max<int64_t>(k, 1);
  std::vector<int64_t> offs(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t dim = p.nd ? p.nd_dims[static_cast<size_t>(j)] : p.dim;
      const int64_t raw = idx.int_at(t * k + j);
      const int64_t v = raw < 0 ? raw + dim : raw;
      if (v < 0 || v >= dim) {
        return invalid_argument("index ", raw, " is out of range for a dimension of size ", dim);
      }
      off += v * (p.nd ? p.nd_strides[static_cast<size_t>(j)] : p.inner);
    }
    offs[static_cast<size_t>(t)] = off;
  }
  const auto* src = static_cast<const uint8_t*>(a.inputs[0]->raw());
  auto* dst = static_cast<uint8_t*>(a.outputs[0]->raw());
  const size_t block = static_cast<size_t>(p.inner) * p.esize;
  const int64_t src_row = p.dim * p.inner;  // Gather: elements per outer row of the input
  parallel_for(
      p.outer * n, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(p.inner, 1)),
      exec.num_threads, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t o = b / n, t = b % n;
          std::memcpy(
              dst + static_cast<size_t>(b) * block,
              src + static_cast<size_t>(o * src_row + offs[static_cast<size_t>(t)]) * p.esize,
              block);
        }
      });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_gather(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_movable(ctx, "gather_rows"));
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().get_int("axis", 0));
  TERN_ASSIGN_OR_RETURN(axis, ops::normalize_axis(axis, static_cast<int64_t>(x.size())));
  RowGather p;
  p.esize = dtype_size(ctx.inputs[0].dtype);
  p.dim = x[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) p.outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  return make_kernel("gather_rows", std::move(p), run_gather_rows);
}

Expected<std::unique_ptr<Kernel>> make_gather_nd(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_movable(ctx, "gather_rows"));
  TERN_ASSIGN_OR_RETURN(int64_t batch_dims, ctx.attrs().get_int("batch_dims", 0));
  if (batch_dims != 0) return unsupported("gather_rows: GatherND with batch_dims");
  const Shape& x = ctx.inputs[0].shape;
  const Shape& i = ctx.inputs[1].shape;
  if (i.empty() || i.back() < 1 || static_cast<size_t>(i.back()) > x.size()) {
    return unsupported("gather_rows: GatherND indices of shape ", shape_str(i));
  }
  RowGather p;
  p.nd = true;
  p.esize = dtype_size(ctx.inputs[0].dtype);
  const std::vector<int64_t> s = contiguous_strides(x);
  for (int64_t d = 0; d < i.back(); ++d) {
    p.nd_dims.push_back(x[static_cast<size_t>(d)]);
    p.nd_strides.push_back(s[static_cast<size_t>(d)]);
  }
  for (size_t d = static_cast<size_t>(i.back()); d < x.size(); ++d) p.inner *= x[d];
  p.dim = 0;
  return make_kernel("gather_rows", std::move(p), run_gather_rows);
}

}  // namespace

TERN_REGISTRATION void register_cpu_data_movement(KernelRegistry& r) {
  r.add("Transpose", "cpu", DType::kUndefined, make_transpose);
  r.add("Slice", "cpu", DType::kUndefined, make_slice);
  r.add("DepthToSpace", "cpu", DType::kUndefined, make_depth_space);
  r.add("SpaceToDepth", "cpu", DType::kUndefined, make_depth_space);
  r.add("Concat", "cpu", DType::kUndefined, make_concat);
  r.add("Split", "cpu", DType::kUndefined, make_split);
  r.add("Gather", "cpu", DType::kUndefined, make_gather);
  r.add("GatherND", "cpu", DType::kUndefined, make_gather_nd);
}

}  // namespace tern
