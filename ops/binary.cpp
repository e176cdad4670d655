// Add, Sub, Mul, Div: numpy broadcasting, every numeric dtype incl. float16/bfloat16 (both inputs
// the same dtype).
#include <cmath>

#include "core/parallel.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

struct BinaryParams {
  BinaryKind kind;
  DType dtype;
  ops::BroadcastRows rows;
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

template <class T, BinaryKind K>
void run_rows(const ops::BroadcastRows& br, const T* a, const T* b, T* out, int threads) {
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
                     for (int64_t i = 0; i < inner; ++i) po[i] = apply(K, pa[i], pb[i]);
                   } else if (sa == 1) {
                     const T vb = *pb;
                     for (int64_t i = 0; i < inner; ++i) po[i] = apply(K, pa[i], vb);
                   } else if (sb == 1) {
                     const T va = *pa;
                     for (int64_t i = 0; i < inner; ++i) po[i] = apply(K, va, pb[i]);
                   } else {
                     const T v = apply(K, *pa, *pb);
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
    switch (p.kind) {
      case BinaryKind::kAdd:
        run_rows<T, BinaryKind::kAdd>(p.rows, pa, pb, po, exec.num_threads);
        break;
      case BinaryKind::kSub:
        run_rows<T, BinaryKind::kSub>(p.rows, pa, pb, po, exec.num_threads);
        break;
      case BinaryKind::kMul:
        run_rows<T, BinaryKind::kMul>(p.rows, pa, pb, po, exec.num_threads);
        break;
      case BinaryKind::kDiv:
        run_rows<T, BinaryKind::kDiv>(p.rows, pa, pb, po, exec.num_threads);
        break;
    }
  });
  return st;
}

template <BinaryKind K>
Expected<std::unique_ptr<Kernel>> make_binary(const OpContext& ctx) {
  DType dt = ctx.inputs[0].dtype;
  if (!ops::visit_all_numeric(dt, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types and the integer types");
  }
  BinaryParams p{
      K, dt, ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape})};
  return make_kernel("reference", std::move(p), run_binary);
}

}  // namespace

void register_op_binary(OpRegistry& r) {
  r.add({"Add", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kAdd>, {}});
  r.add({"Sub", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kSub>, {}});
  r.add({"Mul", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kMul>, {}});
  r.add({"Div", 2, 2, 1, 1, infer_binary, make_binary<BinaryKind::kDiv>, {}});
}

}  // namespace tern
