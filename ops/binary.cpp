// Add, Sub, Mul, Div: numpy broadcasting, every numeric dtype incl. float16/bfloat16 (both inputs
// the same dtype).
#include <cmath>
#include <type_traits>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

struct BinaryParams {
  BinaryKind kind;
  DType dtype;
  ops::BroadcastRows rows;
  // Channel-blocked output (float32 only): one input has the output's shape and layout, the other
  // (input `channel_input`) one value per channel, [1, C, 1, 1] or [C, 1, 1], whose memory order
  // is the same in either layout.
  int block = 0;
  int channel_input = -1;
  int64_t batch = 0, channels = 0, pixels = 0;
};

Status infer_binary(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, 1));
  auto out = ops::broadcast_shapes(ctx.inputs[0].shape, ctx.inputs[1].shape);
  if (!out) {
    return invalid_argument("inputs '", ctx.input_names[0], "' and '", ctx.input_names[1],
                            "': ", out.status().message());
  }
  ctx.set_output(0, ctx.inputs[0].dtype, *out);
  return Status::ok();
}

template <class T>
T apply(BinaryKind k, T a, T b) {
  switch (k) {
    case BinaryKind::kAdd:
      return static_cast<T>(a + b);
    case BinaryKind::kSub:
      return static_cast<T>(a - b);
    case BinaryKind::kMul:
      return static_cast<T>(a * b);
    case BinaryKind::kDiv:
      return static_cast<T>(a / b);
  }
  return T{};
}

// Calls fn(std::integral_constant<BinaryKind, kind>{}): the kind as a compile-time constant.
template <class Fn>
void with_kind(BinaryKind kind, Fn&& fn) {
  switch (kind) {
    case BinaryKind::kAdd:
      return fn(std::integral_constant<BinaryKind, BinaryKind::kAdd>{});
    case BinaryKind::kSub:
      return fn(std::integral_constant<BinaryKind, BinaryKind::kSub>{});
    case BinaryKind::kMul:
      return fn(std::integral_constant<BinaryKind, BinaryKind::kMul>{});
    case BinaryKind::kDiv:
      return fn(std::integral_constant<BinaryKind, BinaryKind::kDiv>{});
  }
}

template <BinaryKind K>
void run_blocked_channel(const BinaryParams& p, const float* full, const float* ch, float* out,
                         int threads) {
  const int64_t blk = p.block, cb = p.channels / blk, plane = p.pixels * blk;
  const bool ch_first = p.channel_input == 0;
  parallel_for(p.batch * cb, std::max<int64_t>(1, 32768 / std::max<int64_t>(plane, 1)), threads,
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* c = ch + (r % cb) * blk;
                   const float* x = full + r * plane;
                   float* y = out + r * plane;
                   for (int64_t px = 0; px < p.pixels; ++px) {
                     const float* xp = x + px * blk;
                     float* yp = y + px * blk;
                     if (ch_first) {
                       for (int64_t l = 0; l < blk; ++l) yp[l] = apply(K, c[l], xp[l]);
                     } else {
                       for (int64_t l = 0; l < blk; ++l) yp[l] = apply(K, xp[l], c[l]);
                     }
                   }
                 }
               });
}

// `kind` is a BinaryKind, or a std::integral_constant of one for a loop per kind.
template <class T, class Kind>
void run_rows(const ops::BroadcastRows& br, const T* a, const T* b, T* out, int threads,
              Kind kind) {
  const BinaryKind op = kind;
  const int64_t inner = br.inner;
  const int64_t sa = br.in_strides[0].back(), sb = br.in_strides[1].back();
  parallel_for(br.rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1)), threads,
               [&](int64_t r0, int64_t r1) {
                 int64_t off[2];
                 for (int64_t r = r0; r < r1; ++r) {
                   br.row_offsets(r, off);
                   const T* pa = a + off[0];
                   const T* pb = b + off[1];
                   T* po = out + r * inner;
                   if (sa == 1 && sb == 1) {
                     for (int64_t i = 0; i < inner; ++i) po[i] = apply(op, pa[i], pb[i]);
                   } else if (sa == 1) {
                     const T vb = *pb;
                     for (int64_t i = 0; i < inner; ++i) po[i] = apply(op, pa[i], vb);
                   } else if (sb == 1) {
                     const T va = *pa;
                     for (int64_t i = 0; i < inner; ++i) po[i] = apply(op, va, pb[i]);
                   } else {
                     const T v = apply(op, *pa, *pb);
                     for (int64_t i = 0; i < inner; ++i) po[i] = v;
                   }
                 }
               });
}

template <class T>
bool has_zero(const Tensor& t) {
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] == T{0}) return true;
  }
  return false;
}

Status run_binary(const BinaryParams& p, const KernelArgs& args, const ExecContext& exec) {
  const Tensor& a = *args.inputs[0];
  const Tensor& b = *args.inputs[1];
  Tensor& out = *args.outputs[0];
  if (p.channel_input >= 0) {
    const float* full = (p.channel_input == 0 ? b : a).data<float>();
    const float* ch = args.inputs[static_cast<size_t>(p.channel_input)]->data<float>();
    float* y = out.data<float>();
    with_kind(p.kind, [&](auto k) {
      run_blocked_channel<decltype(k)::value>(p, full, ch, y, exec.num_threads);
    });
    return Status::ok();
  }
  Status st;
  ops::visit_all_numeric(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      if (p.kind == BinaryKind::kDiv && has_zero<T>(b)) {
        st = invalid_argument("integer division by zero");
        return;
      }
    }
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      with_kind(p.kind, [&](auto k) { run_rows(p.rows, pa, pb, po, exec.num_threads, k); });
    } else {
      // Integers (shape arithmetic, mostly) and the 16-bit floats (converted per element anyway):
      // the kind chosen per element, one loop per type instead of four (code size).
      run_rows(p.rows, pa, pb, po, exec.num_threads, p.kind);
    }
  });
  return st;
}

Expected<std::unique_ptr<Kernel>> make_binary(const OpContext& ctx, BinaryKind kind) {
  DType dt = ctx.inputs[0].dtype;
  if (!ops::visit_all_numeric(dt, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types and the integer types");
  }
  BinaryParams p{
      kind, dt,
      ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape})};
  const Shape& out = ctx.outputs[0].shape;
  if (ctx.outputs[0].block > 0) {
    // Blocked: same-shape inputs in the output's layout compute elementwise as plain ones do;
    // a one-element input broadcasts the same in any layout; a per-channel one needs the
    // channel of each element.
    const int blk = ctx.outputs[0].block;
    for (int i = 0; i < 2; ++i) {
      const TensorInfo& in = ctx.inputs[static_cast<size_t>(i)];
      if (in.shape == out && in.block == blk) continue;
      if (numel(in.shape) == 1 && in.shape.size() <= out.size()) continue;
      if (dt == DType::kFloat32 && p.channel_input < 0 && is_channel_vector(in.shape, out) &&
          out[1] % blk == 0) {
        p.channel_input = i;
        continue;
      }
      return unsupported("input ", i, " ", shape_str(in.shape), " cannot broadcast over a ",
                         "channel-blocked ", shape_str(out));
    }
    if (p.channel_input >= 0) {
      const TensorInfo& other = ctx.inputs[static_cast<size_t>(1 - p.channel_input)];
      if (other.shape != out || other.block != blk) {
        return unsupported("a per-channel input needs the other input in the output's layout");
      }
      p.block = blk;
      p.batch = out[0];
      p.channels = out[1];
      p.pixels = out[2] * out[3];
      return make_elementwise_kernel("blocked_channel", std::move(p), run_binary,
                                     1 - p.channel_input);
    }
  } else if (ctx.inputs[0].block > 0 || ctx.inputs[1].block > 0) {
    return unsupported("blocked inputs with a plain output");
  }
  // The output may take the memory of an input of its own shape and type: element i of both is
  // at the same position.
  for (int i = 0; i < 2; ++i) {
    const TensorInfo& in = ctx.inputs[static_cast<size_t>(i)];
    if (in.shape == out && in.dtype == ctx.outputs[0].dtype && in.block == ctx.outputs[0].block) {
      return make_elementwise_kernel("reference", std::move(p), run_binary, i);
    }
  }
  return make_kernel("reference", std::move(p), run_binary);
}

template <BinaryKind K>
Expected<std::unique_ptr<Kernel>> make_binary(const OpContext& ctx) {
  return make_binary(ctx, K);
}

}  // namespace

TERN_REGISTRATION void register_op_binary(OpRegistry& r) {
  r.add({"Add", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kAdd>, {}, attrs({})});
  r.add({"Sub", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kSub>, {}, attrs({})});
  r.add({"Mul", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kMul>, {}, attrs({})});
  r.add({"Div", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kDiv>, {}, attrs({})});
}

}  // namespace tern
