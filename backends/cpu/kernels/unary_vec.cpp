// Float32 unary ops on Tern's vectorised primitives (AVX-512 / AVX2 / scalar, chosen by the CPU
// capability and the cpu.max_capability flag; the kernel name carries the ISA): Erf, the core of
// GELU's exact form in BERT-style encoders, Sigmoid, Tanh, Gelu, LeakyRelu and Elu, and Softmax
// over a contiguous (last) span.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/vec/vec.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/softmax.h"

namespace tern {

namespace {

struct VecUnary {
  const VecOps* vec = nullptr;
};

// An element-wise op from the table: erf or sigmoid.
template <void (*const VecOps::*kFn)(const float*, float*, int64_t)>
Expected<std::unique_ptr<Kernel>> make_elementwise(const OpContext& ctx, const char* name) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  VecUnary k{&vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)))};
  return make_elementwise_kernel(
      str_cat(name, ".", k.vec->isa), k,
      [](const VecUnary& q, const KernelArgs& a, const ExecContext& exec) {
        const float* x = a.inputs[0]->data<float>();
        float* y = a.outputs[0]->data<float>();
        parallel_for(a.outputs[0]->numel(), 16384, exec.num_threads,
                     [&](int64_t b, int64_t e) { (q.vec->*kFn)(x + b, y + b, e - b); });
        return Status::ok();
      });
}

Expected<std::unique_ptr<Kernel>> make_erf(const OpContext& ctx) {
  return make_elementwise<&VecOps::erf>(ctx, "erf");
}

Expected<std::unique_ptr<Kernel>> make_sigmoid(const OpContext& ctx) {
  return make_elementwise<&VecOps::sigmoid>(ctx, "sigmoid");
}

struct VecActivation {
  const VecOps* vec = nullptr;
  int act = 0;
  float alpha = 0;
};

// Tanh, Gelu (both forms), LeakyRelu, Elu, Relu and Swish through VecOps::activation.
Expected<std::unique_ptr<Kernel>> make_activation(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kFloat32) return ops::dtype_error(ctx, 0, "float32");
  VecActivation k{&vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability)))};
  const std::string& op = ctx.node->op_type;
  const char* name = "tanh";
  if (op == "Gelu") {
    Expected<std::string> approx = ctx.attrs().get_string("approximate", "none");
    if (!approx) return approx.status();
    if (*approx != "none" && *approx != "tanh") {
      return unsupported("Gelu approximate='", *approx, "' (the reference kernel reports it)");
    }
    k.act = static_cast<int>(*approx == "tanh" ? Activation::kGeluTanh : Activation::kGelu);
    name = "gelu";
  } else if (op == "LeakyRelu" || op == "Elu") {
    TERN_ASSIGN_OR_RETURN(k.alpha, ctx.attrs().get_float("alpha", op == "Elu" ? 1.0f : 0.01f));
    k.act = static_cast<int>(op == "Elu" ? Activation::kElu : Activation::kLeakyRelu);
    name = op == "Elu" ? "elu" : "leaky_relu";
  } else if (op == "Relu") {
    k.act = static_cast<int>(Activation::kRelu);
    name = "relu";
  } else if (op == "Swish") {
    TERN_ASSIGN_OR_RETURN(k.alpha, ctx.attrs().get_float("alpha", 1.0f));
    k.act = static_cast<int>(Activation::kSwish);
    name = "swish";
  } else {
    k.act = static_cast<int>(Activation::kTanh);
  }
  return make_elementwise_kernel(
      str_cat(name, ".", k.vec->isa), k,
      [](const VecActivation& q, const KernelArgs& a, const ExecContext& exec) {
        const float* x = a.inputs[0]->data<float>();
        float* y = a.outputs[0]->data<float>();
        parallel_for(a.outputs[0]->numel(), 16384, exec.num_threads, [&](int64_t b, int64_t e) {
          q.vec->activation(q.act, q.alpha, x + b, y + b, e - b);
        });
        return Status::ok();
      });
}

struct VecSoftmax {
  const VecOps* vec = nullptr;
  int64_t rows = 0, len = 0;
  int64_t inner = 1;  // over a strided axis ([rows, len, inner]): run_softmax_strided
  bool log = false;   // LogSoftmax (x86): x - max - log(sum(exp(x - max)))
};

#if defined(__x86_64__)
// Under 16 columns a block's rows are too short for the vector primitives (a call per 2-8
// elements ran slower than the reference kernel): each column is taken alone, its x - max gathered
// a stack run at a time for the exponentials, the rest strided.
Status run_softmax_columns(const VecSoftmax& k, const KernelArgs& a, const ExecContext& exec) {
  constexpr int64_t kRun = 1024;
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const int64_t step = k.inner;
  parallel_for(k.rows * k.inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(k.len, 1)),
               exec.num_threads, [&](int64_t b, int64_t e) {
                 float run[kRun];
                 for (int64_t c = b; c < e; ++c) {
                   const float* xc = x + c / step * k.len * step + c % step;
                   float* yc = y + (xc - x);
                   float m = xc[0];
                   for (int64_t r = 1; r < k.len; ++r) m = xc[r * step] > m ? xc[r * step] : m;
                   double sum = 0;
                   for (int64_t r0 = 0; r0 < k.len; r0 += kRun) {
                     const int64_t n = std::min(kRun, k.len - r0);
                     for (int64_t r = 0; r < n; ++r) run[r] = xc[(r0 + r) * step] - m;
                     sum += k.vec->exp_sum(run, 0.0f, run, n);
                     if (k.log) continue;
                     for (int64_t r = 0; r < n; ++r) yc[(r0 + r) * step] = run[r];
                   }
                   if (k.log) {  // y = x - (max + log(sum))
                     const float sub = m + static_cast<float>(std::log(sum));
                     for (int64_t r = 0; r < k.len; ++r) yc[r * step] = xc[r * step] - sub;
                     continue;
                   }
                   const float inv = static_cast<float>(1.0 / sum);
                   for (int64_t r = 0; r < k.len; ++r) yc[r * step] *= inv;
                 }
               });
  return Status::ok();
}

// Softmax over an axis that is not the last: each [len, inner] block holds `inner` softmaxes down
// its columns (a segmentation net's classes over [N, C, H, W], a detection head's DFL bins). A
// task takes a run of up to 512 columns of one block, row by row on the vector primitives, with
// the run's maxima and sums on its stack. (x86 only: the aarch64 minimal library has no room
// left within its size goal; there the reference kernel runs it.)
Status run_softmax_strided(const VecSoftmax& k, const KernelArgs& a, const ExecContext& exec) {
  if (k.inner < 16) return run_softmax_columns(k, a, exec);
  constexpr int64_t kRun = 512;
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  const int64_t runs = (k.inner + kRun - 1) / kRun, block = k.len * k.inner;
  parallel_for(k.rows * runs, std::max<int64_t>(1, 16384 / std::max<int64_t>(block, 1)),
               exec.num_threads, [&](int64_t b, int64_t e) {
                 float m[kRun], inv[kRun], ex[kRun];  // (ex: LogSoftmax's exponentials)
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t j0 = t % runs * kRun, n = std::min(kRun, k.inner - j0);
                   const float* xb = x + t / runs * block + j0;
                   float* yb = y + t / runs * block + j0;
                   // Each column's maximum (a NaN met later is skipped; a NaN anywhere makes the
                   // column's sum, so all of it, NaN)
                   std::copy(xb, xb + n, m);
                   for (int64_t r = 1; r < k.len; ++r) {
                     const float* xr = xb + r * k.inner;
                     for (int64_t j = 0; j < n; ++j) m[j] = xr[j] > m[j] ? xr[j] : m[j];
                   }
                   // (y may be x: a row of x is read only before its row of y is written.)
                   std::fill(inv, inv + n, 0.0f);
                   for (int64_t r = 0; r < k.len; ++r) {
                     float* yr = yb + r * k.inner;
                     k.vec->binary(1, xb + r * k.inner, 1, m, 1, yr, n);  // x - max
                     // LogSoftmax keeps x - max, its exponentials go to the stack.
                     float* exps = k.log ? ex : yr;
                     k.vec->exp_sum(yr, 0.0f, exps, n);
                     k.vec->binary(0, inv, 1, exps, 1, inv, n);  // the columns' sums
                   }
                   if (k.log) {  // y = (x - max) - log(sum)
                     for (int64_t j = 0; j < n; ++j) inv[j] = std::log(inv[j]);
                     for (int64_t r = 0; r < k.len; ++r) {
                       float* yr = yb + r * k.inner;
                       k.vec->binary(1, yr, 1, inv, 1, yr, n);
                     }
                     continue;
                   }
                   for (int64_t j = 0; j < n; ++j) inv[j] = 1.0f / inv[j];
                   for (int64_t r = 0; r < k.len; ++r) {
                     float* yr = yb + r * k.inner;
                     k.vec->binary(2, yr, 1, inv, 1, yr, n);
                   }
                 }
               });
  return Status::ok();
}

// LogSoftmax over the last axis: y = x - max, its exponentials summed a stack run at a time, then
// y -= log(sum) (y may be x).
Status run_log_softmax_rows(const VecSoftmax& k, const KernelArgs& a, const ExecContext& exec) {
  constexpr int64_t kRun = 1024;
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  parallel_for(k.rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(k.len, 1)), exec.num_threads,
               [&](int64_t b, int64_t e) {
                 float scratch[kRun];
                 for (int64_t r = b; r < e; ++r) {
                   float* yr = y + r * k.len;
                   const float m = k.vec->max(x + r * k.len, k.len);
                   k.vec->affine(x + r * k.len, 1.0f, -m, yr, k.len);
                   double sum = 0;
                   for (int64_t i = 0; i < k.len; i += kRun) {
                     sum += k.vec->exp_sum(yr + i, 0.0f, scratch, std::min(kRun, k.len - i));
                   }
                   k.vec->affine(yr, 1.0f, -static_cast<float>(std::log(sum)), yr, k.len);
                 }
               });
  return Status::ok();
}
#endif

Status run_softmax(const VecSoftmax& k, const KernelArgs& a, const ExecContext& exec) {
#if defined(__x86_64__)
  if (k.inner > 1) return run_softmax_strided(k, a, exec);
  if (k.log) return run_log_softmax_rows(k, a, exec);
#endif
  const float* x = a.inputs[0]->data<float>();
  float* y = a.outputs[0]->data<float>();
  parallel_for(k.rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(k.len, 1)), exec.num_threads,
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const float* xr = x + r * k.len;
                   float* yr = y + r * k.len;
                   const float m = k.vec->max(xr, k.len);
                   const double sum = k.vec->exp_sum(xr, m, yr, k.len);
                   k.vec->scale(yr, static_cast<float>(1.0 / sum), k.len);
                 }
               });
  return Status::ok();
}

// Softmax, and on x86 LogSoftmax (`log`): one body.
Expected<std::unique_ptr<Kernel>> make_softmax_as(const OpContext& ctx, bool log) {
  TERN_ASSIGN_OR_RETURN(ops::SoftmaxSpan sp, ops::parse_softmax_span(ctx));
#if !defined(__x86_64__)
  if (sp.inner != 1) return unsupported("vectorised Softmax: not over the last axis");
#endif
  if (sp.outer == 0 || sp.axis_len == 0 || sp.inner == 0) {
    return unsupported("vectorised Softmax: empty input");
  }
  VecSoftmax k{&vec_ops(effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability))), sp.outer,
               sp.axis_len, sp.inner, log};
  return make_elementwise_kernel(str_cat(log ? "log_softmax." : "softmax.", k.vec->isa), k,
                                 run_softmax);  // by rows
}

Expected<std::unique_ptr<Kernel>> make_softmax(const OpContext& ctx) {
  return make_softmax_as(ctx, false);
}

#if defined(__x86_64__)
Expected<std::unique_ptr<Kernel>> make_log_softmax(const OpContext& ctx) {
  return make_softmax_as(ctx, true);
}
#endif

}  // namespace

TERN_REGISTRATION void register_cpu_unary_vec(KernelRegistry& r) {
  r.add("Erf", "cpu", DType::kFloat32, make_erf, /*priority=*/1);
  r.add("Sigmoid", "cpu", DType::kFloat32, make_sigmoid, /*priority=*/1);
  r.add("Softmax", "cpu", DType::kFloat32, make_softmax, /*priority=*/1);
#if defined(__x86_64__)  // (the aarch64 minimal library has no room: the reference kernel there)
  r.add("LogSoftmax", "cpu", DType::kFloat32, make_log_softmax, /*priority=*/1);
#endif
  for (const char* op : {"Tanh", "Gelu", "LeakyRelu", "Elu", "Relu", "Swish"}) {
    r.add(op, "cpu", DType::kFloat32, make_activation, /*priority=*/1);
  }
}

}  // namespace tern
