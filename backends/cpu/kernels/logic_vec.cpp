// Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual on float32, int32, int64; And,
// Or, Xor on bool), Where (any element of 1, 2, 4 or 8 bytes), Not and Expand on the CPU. The
// broadcast walks rows as the reference does, but each row runs a loop specialised for its
// operands' steps (0: broadcast, 1: contiguous) with the op fixed at compile time, which the
// compiler vectorises; the reference calls a per-element function with a runtime op.
#include <algorithm>
#include <cstring>

#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/elementwise.h"
#include "ops/common/op_utils.h"

namespace tern {
namespace {

// Rows of the broadcast plan, in parallel: fn(output offset, input offsets, row length).
template <size_t N, class Fn>
void for_rows(const ops::BroadcastRows& br, int threads, Fn&& fn) {
  const int64_t inner = br.inner;
  parallel_for(br.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), threads,
               [&](int64_t r0, int64_t r1) {
                 int64_t base[N];
                 for (int64_t r = r0; r < r1; ++r) {
                   br.row_offsets(r, base);
                   fn(r * inner, static_cast<const int64_t*>(base), inner);
                 }
               });
}

// The plan's last-dim steps, when each is 0 or 1 (what the row loops are specialised for).
template <size_t N>
bool unit_steps(const ops::BroadcastRows& br) {
  for (size_t k = 0; k < N; ++k) {
    const int64_t s = br.in_strides[k].back();
    if (s != 0 && s != 1) return false;
  }
  return true;
}

// ---- comparisons --------------------------------------------------------------------------------

enum class Cmp { kEq, kLt, kGt, kLe, kGe, kAnd, kOr, kXor };

template <Cmp Op, class T>
inline uint8_t cmp(T a, T b) {
  if constexpr (Op == Cmp::kEq) return a == b;
  if constexpr (Op == Cmp::kLt) return a < b;
  if constexpr (Op == Cmp::kGt) return a > b;
  if constexpr (Op == Cmp::kLe) return a <= b;
  if constexpr (Op == Cmp::kGe) return a >= b;
  if constexpr (Op == Cmp::kAnd) return (a != 0) & (b != 0);
  if constexpr (Op == Cmp::kOr) return (a != 0) | (b != 0);
  return (a != 0) != (b != 0);
}

template <Cmp Op, class T, int SA, int SB>
void cmp_row(const T* a, const T* b, uint8_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = cmp<Op>(a[i * SA], b[i * SB]);
}

using CmpRow = void (*)(const void*, const void*, uint8_t*, int64_t);

struct CmpKernel {
  ops::BroadcastRows rows;
  CmpRow row[4];  // by step a * 2 + step b
  size_t esize;
};

template <Cmp Op, class T, int SA, int SB>
void cmp_row_erased(const void* a, const void* b, uint8_t* y, int64_t n) {
  cmp_row<Op, T, SA, SB>(static_cast<const T*>(a), static_cast<const T*>(b), y, n);
}

template <Cmp Op, class T>
void cmp_table(CmpRow* row) {
  row[0] = cmp_row_erased<Op, T, 0, 0>;
  row[1] = cmp_row_erased<Op, T, 0, 1>;
  row[2] = cmp_row_erased<Op, T, 1, 0>;
  row[3] = cmp_row_erased<Op, T, 1, 1>;
}

// Op's row loops for dtype dt (false: none). Each op has its own, referenced only by its own
// registration (through make_cmp<Op>), so a selective build keeps the compares it registers only;
// the rest of the factory is one body for all eight.
template <Cmp Op>
bool cmp_rows(DType dt, CmpRow* row) {
  if constexpr (Op == Cmp::kAnd || Op == Cmp::kOr || Op == Cmp::kXor) {
    if (dt != DType::kBool) return false;
    cmp_table<Op, uint8_t>(row);
  } else if (dt == DType::kFloat32) {
    cmp_table<Op, float>(row);
  } else if (dt == DType::kInt64) {
    cmp_table<Op, int64_t>(row);
  } else if (dt == DType::kInt32) {
    cmp_table<Op, int32_t>(row);
  } else {
    return false;
  }
  return true;
}

Status run_cmp(const CmpKernel& k, const KernelArgs& a, const ExecContext& exec) {
  const auto* x0 = static_cast<const uint8_t*>(a.inputs[0]->raw());
  const auto* x1 = static_cast<const uint8_t*>(a.inputs[1]->raw());
  uint8_t* y = a.outputs[0]->data<uint8_t>();
  const auto fn = k.row[k.rows.in_strides[0].back() * 2 + k.rows.in_strides[1].back()];
  const int64_t es = static_cast<int64_t>(k.esize);
  for_rows<2>(k.rows, exec.num_threads, [&](int64_t o, const int64_t* off, int64_t n) {
    fn(x0 + off[0] * es, x1 + off[1] * es, y + o, n);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_cmp(const OpContext& ctx, bool logical,
                                           bool (*rows_of)(DType, CmpRow*)) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  const DType dt = ctx.inputs[0].dtype;
  if (ctx.inputs[1].dtype != dt) return unsupported("compare_vec: mixed types");
  CmpKernel k;
  k.rows = ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape});
  if (!unit_steps<2>(k.rows)) return unsupported("compare_vec: strided rows");
  if (!rows_of(dt, k.row)) {
    if (logical) return ops::dtype_error(ctx, 0, "bool");
    return unsupported("compare_vec: ", dtype_name(dt));
  }
  k.esize = dtype_size(dt);
  return make_kernel("compare_vec", std::move(k), run_cmp);
}

template <Cmp Op>
Expected<std::unique_ptr<Kernel>> make_cmp(const OpContext& ctx) {
  return make_cmp(ctx, Op == Cmp::kAnd || Op == Cmp::kOr || Op == Cmp::kXor, cmp_rows<Op>);
}

// ---- Where --------------------------------------------------------------------------------------

template <class T, int SC, int SX, int SY>
void where_row(const uint8_t* c, const void* xv, const void* yv, void* ov, int64_t n) {
  const T* x = static_cast<const T*>(xv);
  const T* y = static_cast<const T*>(yv);
  T* o = static_cast<T*>(ov);
  for (int64_t i = 0; i < n; ++i) o[i] = c[i * SC] ? x[i * SX] : y[i * SY];
}

using WhereRow = void (*)(const uint8_t*, const void*, const void*, void*, int64_t);

template <class T>
void where_table(WhereRow* t) {
  t[0] = where_row<T, 0, 0, 0>;
  t[1] = where_row<T, 0, 0, 1>;
  t[2] = where_row<T, 0, 1, 0>;
  t[3] = where_row<T, 0, 1, 1>;
  t[4] = where_row<T, 1, 0, 0>;
  t[5] = where_row<T, 1, 0, 1>;
  t[6] = where_row<T, 1, 1, 0>;
  t[7] = where_row<T, 1, 1, 1>;
}

struct WhereKernel {
  ops::BroadcastRows rows;
  WhereRow row[8];  // by step c * 4 + step x * 2 + step y
  size_t esize;
};

Status run_where(const WhereKernel& k, const KernelArgs& a, const ExecContext& exec) {
  const uint8_t* c = a.inputs[0]->data<uint8_t>();
  const auto* x = static_cast<const uint8_t*>(a.inputs[1]->raw());
  const auto* y = static_cast<const uint8_t*>(a.inputs[2]->raw());
  auto* out = static_cast<uint8_t*>(a.outputs[0]->raw());
  const auto& st = k.rows.in_strides;
  const WhereRow fn = k.row[st[0].back() * 4 + st[1].back() * 2 + st[2].back()];
  const int64_t es = static_cast<int64_t>(k.esize);
  for_rows<3>(k.rows, exec.num_threads, [&](int64_t o, const int64_t* off, int64_t n) {
    fn(c + off[0], x + off[1] * es, y + off[2] * es, out + o * es, n);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_where(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  const DType dt = ctx.inputs[1].dtype;
  const size_t es = dtype_size(dt);
  if (dt == DType::kString || ctx.inputs[2].dtype != dt || ctx.inputs[0].dtype != DType::kBool) {
    return unsupported("where_vec: types");
  }
  WhereKernel k;
  k.rows = ops::plan_broadcast(ctx.outputs[0].shape,
                               {ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.inputs[2].shape});
  if (!unit_steps<3>(k.rows)) return unsupported("where_vec: strided rows");
  k.esize = es;
  switch (es) {
    case 1:
      where_table<uint8_t>(k.row);
      break;
    case 2:
      where_table<uint16_t>(k.row);
      break;
    case 4:
      where_table<uint32_t>(k.row);
      break;
    case 8:
      where_table<uint64_t>(k.row);
      break;
    default:
      return unsupported("where_vec: element size ", es);
  }
  return make_kernel("where_vec", std::move(k), run_where);
}

// ---- Not ----------------------------------------------------------------------------------------

Expected<std::unique_ptr<Kernel>> make_not(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kBool) return ops::dtype_error(ctx, 0, "bool");
  return make_elementwise_kernel(
      "not_vec", 0, [](const int&, const KernelArgs& a, const ExecContext& exec) {
        const uint8_t* x = a.inputs[0]->data<uint8_t>();
        uint8_t* y = a.outputs[0]->data<uint8_t>();
        parallel_for(a.outputs[0]->numel(), 65536, exec.num_threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) y[i] = x[i] == 0;
        });
        return Status::ok();
      });
}

// ---- Expand -------------------------------------------------------------------------------------

struct ExpandKernel {
  ops::BroadcastRows rows;
  size_t esize;
};

template <class T>
void fill_row(const T* x, T* y, int64_t n) {
  const T v = *x;
  for (int64_t i = 0; i < n; ++i) y[i] = v;
}

Status run_expand(const ExpandKernel& k, const KernelArgs& a, const ExecContext& exec) {
  const auto* x = static_cast<const uint8_t*>(a.inputs[0]->raw());
  auto* y = static_cast<uint8_t*>(a.outputs[0]->raw());
  const int64_t es = static_cast<int64_t>(k.esize);
  const bool contiguous = k.rows.in_strides[0].back() == 1;
  for_rows<1>(k.rows, exec.num_threads, [&](int64_t o, const int64_t* off, int64_t n) {
    const uint8_t* src = x + off[0] * es;
    uint8_t* dst = y + o * es;
    if (contiguous) {
      std::memcpy(dst, src, static_cast<size_t>(n * es));
    } else if (es == 4) {
      fill_row(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint32_t*>(dst), n);
    } else if (es == 8) {
      fill_row(reinterpret_cast<const uint64_t*>(src), reinterpret_cast<uint64_t*>(dst), n);
    } else if (es == 2) {
      fill_row(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<uint16_t*>(dst), n);
    } else {
      fill_row(src, dst, n);
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_expand(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  const size_t es = dtype_size(ctx.inputs[0].dtype);
  if (ctx.inputs[0].dtype == DType::kString || (es != 1 && es != 2 && es != 4 && es != 8)) {
    return unsupported("expand_rows: element size ", es);
  }
  ExpandKernel k{ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape}), es};
  if (!unit_steps<1>(k.rows)) return unsupported("expand_rows: strided rows");
  return make_kernel("expand_rows", std::move(k), run_expand);
}

}  // namespace

TERN_REGISTRATION void register_cpu_logic_vec(KernelRegistry& r) {
  r.add("Equal", "cpu", DType::kUndefined, make_cmp<Cmp::kEq>);
  r.add("Less", "cpu", DType::kUndefined, make_cmp<Cmp::kLt>);
  r.add("Greater", "cpu", DType::kUndefined, make_cmp<Cmp::kGt>);
  r.add("LessOrEqual", "cpu", DType::kUndefined, make_cmp<Cmp::kLe>);
  r.add("GreaterOrEqual", "cpu", DType::kUndefined, make_cmp<Cmp::kGe>);
  r.add("And", "cpu", DType::kUndefined, make_cmp<Cmp::kAnd>);
  r.add("Or", "cpu", DType::kUndefined, make_cmp<Cmp::kOr>);
  r.add("Xor", "cpu", DType::kUndefined, make_cmp<Cmp::kXor>);
  r.add("Where", "cpu", DType::kUndefined, make_where);
  r.add("Not", "cpu", DType::kUndefined, make_not);
  r.add("Expand", "cpu", DType::kUndefined, make_expand);
}

}  // namespace tern
