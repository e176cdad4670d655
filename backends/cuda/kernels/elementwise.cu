// Element-wise kernels: broadcasting binary ops, activation chains, the bias/residual/activation
// epilogue of convolutions and GEMMs, casts and inference batch norm.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/kernels/common.cuh"

namespace tern::cuda {

namespace {

// The ops every type computes alike.
template <class T>
__device__ T common_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kMax:
      return a > b ? a : b;
    case BinaryOp::kMin:
      return a < b ? a : b;
    case BinaryOp::kPRelu:
      return a < T(0) ? a * b : a;
    default:
      return a;
  }
}

// Integer division and power follow ONNX: truncation toward zero (0 for a zero divisor here);
// integer powers by squaring.
__device__ int64_t integer_binary(BinaryOp op, int64_t a, int64_t b) {
  if (op == BinaryOp::kDiv) return b == 0 ? 0 : a / b;
  if (op != BinaryOp::kPow) return common_binary(op, a, b);
  int64_t r = 1;
  for (int64_t e = b; e > 0; e >>= 1, a *= a) {
    if (e & 1) r *= a;
  }
  return b < 0 ? 0 : r;
}

// Floats (and the half types, computed in float): powf, and NaN-propagating Max / Min.
__device__ float float_binary(BinaryOp op, float a, float b) {
  if (op == BinaryOp::kPow) return powf(a, b);
  if ((op == BinaryOp::kMax || op == BinaryOp::kMin) && (isnan(a) || isnan(b))) return nanf("");
  if (op == BinaryOp::kMax) return fmaxf(a, b);
  if (op == BinaryOp::kMin) return fminf(a, b);
  return common_binary(op, a, b);
}

template <class T>
__device__ T apply_binary(BinaryOp op, T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return static_cast<T>(integer_binary(op, a, b));
  } else {
    return T(float_binary(op, float(a), float(b)));
  }
}

template <class T>
__global__ void binary_same(BinaryOp op, const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) y[i] = apply_binary(op, a[i], b[i]);
}

template <class T>
__global__ void binary_bcast(BinaryOp op, const T* a, const T* b, T* y, int64_t n, Broadcast d) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t idx = rem % d.shape[k];
      rem /= d.shape[k];
      oa += idx * d.a[k];
      ob += idx * d.b[k];
    }
    y[i] = apply_binary(op, a[oa], b[ob]);
  }
}

template <class T>
cudaError_t launch_binary(BinaryOp op, const void* a, const void* b, void* y, int64_t n,
                          const Broadcast& d, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const auto* pa = static_cast<const T*>(a);
  const auto* pb = static_cast<const T*>(b);
  auto* py = static_cast<T*>(y);
  if (d.same) {
    binary_same<T><<<blocks_for(n), kThreads, 0, s>>>(op, pa, pb, py, n);
  } else {
    binary_bcast<T><<<blocks_for(n), kThreads, 0, s>>>(op, pa, pb, py, n, d);
  }
  return cudaGetLastError();
}

__device__ float apply_act(const ActStep& st, float v) {
  switch (st.act) {
    case Act::kIdentity:
      return v;
    case Act::kRelu:
      return v > 0.f ? v : 0.f;
    case Act::kLeakyRelu:
      return v >= 0.f ? v : v * st.p0;
    case Act::kClip:
      return fminf(fmaxf(v, st.p0), st.p1);
    case Act::kSigmoid:
      return 1.f / (1.f + expf(-v));
    case Act::kHardSigmoid:
      return fminf(fmaxf(st.p0 * v + st.p1, 0.f), 1.f);
    case Act::kHardSwish:
      return v * fminf(fmaxf(v / 6.f + 0.5f, 0.f), 1.f);
    case Act::kTanh:
      return tanhf(v);
    case Act::kAffine:
      return v * st.p0 + st.p1;
    case Act::kGeluErf:
      return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case Act::kGeluTanh:
      return 0.5f * v * (1.f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    case Act::kErf:
      return erff(v);
    case Act::kSqrt:
      return sqrtf(v);
    case Act::kExp:
      return expf(v);
    case Act::kLog:
      return logf(v);
    case Act::kNeg:
      return -v;
    case Act::kAbs:
      return fabsf(v);
    case Act::kReciprocal:
      return 1.f / v;
    case Act::kSoftplus:
      return v > 20.f ? v : log1pf(expf(v));
    case Act::kElu:
      return v >= 0.f ? v : st.p0 * (expf(v) - 1.f);
    case Act::kCeil:
      return ceilf(v);
    case Act::kFloor:
      return floorf(v);
    case Act::kRound:
      return rintf(v);  // half to even, as ONNX Round
    case Act::kSin:
      return sinf(v);
    case Act::kCos:
      return cosf(v);
    case Act::kSign:
      return v > 0.f ? 1.f : (v < 0.f ? -1.f : (v == 0.f ? 0.f : v));
    case Act::kSelu:
      return v > 0.f ? st.p1 * v : st.p1 * st.p0 * (expf(v) - 1.f);
    case Act::kMish:
      return v * tanhf(v > 20.f ? v : log1pf(expf(v)));
    case Act::kSwish:
      return v / (1.f + expf(-st.p0 * v));
  }
  return v;
}

__device__ float apply_chain(const ActChain& c, float v) {
  for (int k = 0; k < c.n; ++k) v = apply_act(c.steps[k], v);
  return v;
}

template <class T>
__global__ void unary_kernel(ActChain c, const T* x, T* y, int64_t n) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) y[i] = T(apply_chain(c, float(x[i])));
}

__global__ void bias_act_kernel(float* y, const float* bias, const float* residual, int64_t n,
                                int64_t channels, int64_t inner, ActChain c) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    float v = y[i];
    if (bias) v += bias[(i / inner) % channels];
    if (residual) v += residual[i];
    y[i] = apply_chain(c, v);
  }
}

template <class From, class To>
__device__ To convert(From v) {
  if constexpr (std::is_same<To, bool>::value) {
    return float(v) != 0.f;
  } else if constexpr (std::is_same<From, __half>::value ||
                       std::is_same<From, __nv_bfloat16>::value) {
    return To(float(v));
  } else if constexpr (std::is_same<To, __half>::value || std::is_same<To, __nv_bfloat16>::value) {
    return To(float(v));
  } else if constexpr (std::is_floating_point<From>::value && !std::is_floating_point<To>::value) {
    // Float to integer truncates toward zero; NaN and out-of-range values give the minimum.
    const double d = double(v);
    if (!(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)) return To(INT64_MIN);
    return To(static_cast<int64_t>(d));
  } else {
    return To(v);
  }
}

template <class From, class To>
__global__ void cast_kernel(const From* x, To* y, int64_t n) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) y[i] = convert<From, To>(x[i]);
}

template <class From, class To>
cudaError_t launch_cast(const void* x, void* y, int64_t n, cudaStream_t s) {
  cast_kernel<From, To>
      <<<blocks_for(n), kThreads, 0, s>>>(static_cast<const From*>(x), static_cast<To*>(y), n);
  return cudaGetLastError();
}

template <class From>
cudaError_t cast_from(Elem to, const void* x, void* y, int64_t n, cudaStream_t s) {
  switch (to) {
    case Elem::kF32:
      return launch_cast<From, float>(x, y, n, s);
    case Elem::kF16:
      return launch_cast<From, __half>(x, y, n, s);
    case Elem::kBF16:
      return launch_cast<From, __nv_bfloat16>(x, y, n, s);
    case Elem::kI32:
      return launch_cast<From, int32_t>(x, y, n, s);
    case Elem::kI64:
      return launch_cast<From, int64_t>(x, y, n, s);
    case Elem::kU8:
      return launch_cast<From, uint8_t>(x, y, n, s);
    case Elem::kBool:
      return launch_cast<From, bool>(x, y, n, s);
  }
  return cudaErrorInvalidValue;
}

__global__ void batch_norm_kernel(const float* x, const float* scale, const float* bias,
                                  const float* mean, const float* var, float* y, int64_t n,
                                  int64_t channels, int64_t inner, float eps) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    const int64_t c = (i / inner) % channels;
    y[i] = (x[i] - mean[c]) * rsqrtf(var[c] + eps) * scale[c] + bias[c];
  }
}

}  // namespace

cudaError_t binary(BinaryOp op, Elem t, const void* a, const void* b, void* y, int64_t n,
                   const Broadcast& d, cudaStream_t s) {
  switch (t) {
    case Elem::kF32:
      return launch_binary<float>(op, a, b, y, n, d, s);
    case Elem::kF16:
      return launch_binary<__half>(op, a, b, y, n, d, s);
    case Elem::kBF16:
      return launch_binary<__nv_bfloat16>(op, a, b, y, n, d, s);
    case Elem::kI32:
      return launch_binary<int32_t>(op, a, b, y, n, d, s);
    case Elem::kI64:
      return launch_binary<int64_t>(op, a, b, y, n, d, s);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t unary(const ActChain& c, Elem t, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (t == Elem::kF32) {
    unary_kernel<float><<<blocks_for(n), kThreads, 0, s>>>(c, static_cast<const float*>(x),
                                                           static_cast<float*>(y), n);
  } else if (t == Elem::kF16) {
    unary_kernel<__half><<<blocks_for(n), kThreads, 0, s>>>(c, static_cast<const __half*>(x),
                                                            static_cast<__half*>(y), n);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t bias_act(float* y, const float* bias, const float* residual, int64_t n,
                     int64_t channels, int64_t inner, const ActChain& c, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  bias_act_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, bias, residual, n, channels, inner, c);
  return cudaGetLastError();
}

cudaError_t cast(Elem from, Elem to, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case Elem::kF32:
      return cast_from<float>(to, x, y, n, s);
    case Elem::kF16:
      return cast_from<__half>(to, x, y, n, s);
    case Elem::kBF16:
      return cast_from<__nv_bfloat16>(to, x, y, n, s);
    case Elem::kI32:
      return cast_from<int32_t>(to, x, y, n, s);
    case Elem::kI64:
      return cast_from<int64_t>(to, x, y, n, s);
    case Elem::kU8:
      return cast_from<uint8_t>(to, x, y, n, s);
    case Elem::kBool:
      return cast_from<bool>(to, x, y, n, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t batch_norm(const float* x, const float* scale, const float* bias, const float* mean,
                       const float* var, float* y, int64_t n, int64_t channels, int64_t inner,
                       float eps, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  batch_norm_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, scale, bias, mean, var, y, n, channels,
                                                       inner, eps);
  return cudaGetLastError();
}

}  // namespace tern::cuda
