// Row-wise kernels: reductions over [outer, r, inner], softmax and layer norm. When inner is 1 a
// block reduces one contiguous row; otherwise each thread walks one (outer, inner) column.
#include <cuda_fp16.h>

#include "backends/cuda/kernels/common.cuh"

namespace tern::cuda {

namespace {

__device__ float reduce_init(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return -INFINITY;
    case ReduceOp::kMin:
      return INFINITY;
    case ReduceOp::kProd:
      return 1.f;
    default:
      return 0.f;
  }
}
__device__ float reduce_term(ReduceOp op, float v) {
  switch (op) {
    case ReduceOp::kSumSquare:
    case ReduceOp::kL2:
      return v * v;
    case ReduceOp::kL1:
      return fabsf(v);
    default:
      return v;
  }
}
__device__ float reduce_combine(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kMax:
      return isnan(a) || isnan(b) ? nanf("") : fmaxf(a, b);
    case ReduceOp::kMin:
      return isnan(a) || isnan(b) ? nanf("") : fminf(a, b);
    case ReduceOp::kProd:
      return a * b;
    default:
      return a + b;
  }
}
__device__ float reduce_finish(ReduceOp op, float acc, int64_t r, float max) {
  switch (op) {
    case ReduceOp::kMean:
      return acc / static_cast<float>(r);
    case ReduceOp::kL2:
      return sqrtf(acc);
    case ReduceOp::kLogSumExp:
      return max + logf(acc);
    default:
      return acc;
  }
}

// One block per row (inner == 1).
__global__ void reduce_rows(ReduceOp op, const float* x, float* y, int64_t r) {
  __shared__ float shared[32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * r;
  float max = 0.f;
  if (op == ReduceOp::kLogSumExp) {
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < r; j += blockDim.x) m = fmaxf(m, row[j]);
    max = block_reduce<true>(m, shared);
    if (isinf(max)) max = 0.f;
  }
  float acc = reduce_init(op);
  for (int64_t j = threadIdx.x; j < r; j += blockDim.x) {
    const float v = op == ReduceOp::kLogSumExp ? expf(row[j] - max) : reduce_term(op, row[j]);
    acc = reduce_combine(op, acc, v);
  }
  // Combine per warp, then across warps (max/min/prod need their own combine).
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1)
    acc = reduce_combine(op, acc, __shfl_xor_sync(0xffffffffu, acc, o));
  // LogSumExp's block_reduce above ends with every thread reading `shared`: wait for all of them
  // before it is written again.
  __syncthreads();
  if (lane == 0) shared[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = shared[0];
    for (int w = 1; w < static_cast<int>((blockDim.x + 31) >> 5); ++w)
      t = reduce_combine(op, t, shared[w]);
    y[blockIdx.x] = reduce_finish(op, t, r, max);
  }
}

// One thread per (outer, inner) column.
__global__ void reduce_columns(ReduceOp op, const float* x, float* y, int64_t outer, int64_t r,
                               int64_t inner) {
  for (int64_t i = grid_index(); i < outer * inner; i += grid_stride()) {
    const int64_t o = i / inner, in = i % inner;
    const float* col = x + o * r * inner + in;
    float max = 0.f;
    if (op == ReduceOp::kLogSumExp) {
      max = -INFINITY;
      for (int64_t j = 0; j < r; ++j) max = fmaxf(max, col[j * inner]);
      if (isinf(max)) max = 0.f;
    }
    float acc = reduce_init(op);
    for (int64_t j = 0; j < r; ++j) {
      const float v = col[j * inner];
      acc =
          reduce_combine(op, acc, op == ReduceOp::kLogSumExp ? expf(v - max) : reduce_term(op, v));
    }
    y[i] = reduce_finish(op, acc, r, max);
  }
}

template <class T>
__global__ void softmax_rows(const T* x, T* y, int64_t n, bool log) {
  __shared__ float shared[32];
  const T* row = x + static_cast<int64_t>(blockIdx.x) * n;
  T* out = y + static_cast<int64_t>(blockIdx.x) * n;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, float(row[j]));
  m = block_reduce<true>(m, shared);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(float(row[j]) - m);
  sum = block_reduce<false>(sum, shared);
  const float lse = logf(sum);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = float(row[j]) - m;
    out[j] = T(log ? v - lse : expf(v) / sum);
  }
}

template <class T>
__global__ void softmax_columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                                bool log) {
  for (int64_t i = grid_index(); i < outer * inner; i += grid_stride()) {
    const int64_t base = (i / inner) * n * inner + i % inner;
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = fmaxf(m, float(x[base + j * inner]));
    float sum = 0.f;
    for (int64_t j = 0; j < n; ++j) sum += expf(float(x[base + j * inner]) - m);
    const float lse = logf(sum);
    for (int64_t j = 0; j < n; ++j) {
      const float v = float(x[base + j * inner]) - m;
      y[base + j * inner] = T(log ? v - lse : expf(v) / sum);
    }
  }
}

// Two-pass (mean, then centred variance) per row: one block per row.
__global__ void layer_norm_rows(const float* x, const float* scale, const float* bias, float* y,
                                int64_t n, float eps) {
  __shared__ float shared[32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float* out = y + static_cast<int64_t>(blockIdx.x) * n;
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += row[j];
  const float mean = block_reduce<false>(s, shared) / static_cast<float>(n);
  float q = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float d = row[j] - mean;
    q += d * d;
  }
  const float inv = rsqrtf(block_reduce<false>(q, shared) / static_cast<float>(n) + eps);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    out[j] = (row[j] - mean) * inv * scale[j] + (bias ? bias[j] : 0.f);
  }
}

template <class T>
cudaError_t launch_softmax(const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                           bool log, cudaStream_t s) {
  const auto* px = static_cast<const T*>(x);
  auto* py = static_cast<T*>(y);
  if (inner == 1) {
    for (int64_t o = 0; o < outer; o += 65535) {  // grid.x limit per launch
      const int64_t rows = outer - o < 65535 ? outer - o : 65535;
      softmax_rows<T>
          <<<static_cast<unsigned>(rows), kThreads, 0, s>>>(px + o * n, py + o * n, n, log);
    }
  } else {
    softmax_columns<T><<<blocks_for(outer * inner), kThreads, 0, s>>>(px, py, outer, n, inner, log);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t reduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t r, int64_t inner,
                   cudaStream_t s) {
  if (outer * inner == 0) return cudaSuccess;
  if (inner == 1 && r >= 64) {
    for (int64_t o = 0; o < outer; o += 65535) {
      const int64_t rows = outer - o < 65535 ? outer - o : 65535;
      reduce_rows<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(op, x + o * r, y + o, r);
    }
  } else {
    reduce_columns<<<blocks_for(outer * inner), kThreads, 0, s>>>(op, x, y, outer, r, inner);
  }
  return cudaGetLastError();
}

cudaError_t softmax(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                    bool log, cudaStream_t s) {
  if (outer * n * inner == 0) return cudaSuccess;
  if (t == Elem::kF32) return launch_softmax<float>(x, y, outer, n, inner, log, s);
  if (t == Elem::kF16) return launch_softmax<__half>(x, y, outer, n, inner, log, s);
  return cudaErrorInvalidValue;
}

cudaError_t layer_norm(const float* x, const float* scale, const float* bias, float* y,
                       int64_t rows, int64_t n, float eps, cudaStream_t s) {
  for (int64_t o = 0; o < rows; o += 65535) {
    const int64_t r = rows - o < 65535 ? rows - o : 65535;
    layer_norm_rows<<<static_cast<unsigned>(r), kThreads, 0, s>>>(x + o * n, scale, bias, y + o * n,
                                                                  n, eps);
  }
  return cudaGetLastError();
}

}  // namespace tern::cuda
