// Scaled-dot-product attention kernels. FLASH tiles keys and values through shared memory with
// an online softmax (each query row is owned by four threads that split the head dims); the
// memory-efficient kernel gives each query row a warp that streams keys straight from global
// memory; MATH's softmax step works on the materialised score matrix. All compute in float; a
// query row whose keys are all hidden gives zeros (as the CPU kernels).
#include <cuda_fp16.h>

#include "backends/cuda/kernels/common.cuh"

namespace tern::cuda {

namespace {

// Score after softcap, mask and causal masking (-inf: hidden).
__device__ inline float finish_score(const AttnDesc& a, const void* mask, float s, int64_t b,
                                     int64_t h, int64_t i, int64_t j) {
  if (a.softcap > 0.f) s = a.softcap * tanhf(s / a.softcap);
  if (a.causal && j > i + a.causal_offset) return -INFINITY;
  if (a.mask) {
    if (j >= a.mask_len) return -INFINITY;
    const int64_t off = b * a.m_sb + h * a.m_sh + i * a.m_si + j * a.m_sj;
    if (a.mask == 1) {
      if (!static_cast<const bool*>(mask)[off]) return -INFINITY;
    } else {
      s += static_cast<const float*>(mask)[off];
    }
  }
  return s;
}

// Online softmax state of one row: running max m, sum l; returns the factor that rescales the
// accumulator and writes p, the new key's weight.
__device__ inline float online_update(float& m, float& l, float s, float& p) {
  if (s == -INFINITY) {
    p = 0.f;
    return 1.f;
  }
  const float mn = fmaxf(m, s);
  const float corr = m == -INFINITY ? 0.f : expf(m - mn);
  p = expf(s - mn);
  l = l * corr + p;
  m = mn;
  return corr;
}

constexpr int kFlashRows = 64;  // query rows per block
constexpr int kFlashSplit = 4;  // threads per query row
constexpr int kFlashKeys = 32;  // keys per shared-memory tile
constexpr int kFlashMaxDim = 128;
constexpr int kSlice = kFlashMaxDim / kFlashSplit;

template <class T>
__global__ void __launch_bounds__(kFlashRows* kFlashSplit)
    flash_kernel(AttnDesc a, const T* q, const T* k, const T* v, const void* mask, T* y) {
  __shared__ float ks[kFlashKeys][kFlashMaxDim];
  __shared__ float vs[kFlashKeys][kFlashMaxDim];
  const int64_t bh = blockIdx.y;
  const int64_t b = bh / a.q_heads, h = bh % a.q_heads;
  const int64_t hk = h / (a.q_heads / a.kv_heads);
  const int tid = threadIdx.x;
  const int row = tid / kFlashSplit, sub = tid % kFlashSplit;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kFlashRows + row;
  const bool live = i < a.seq_q;
  const T* qr = q + b * a.q_sb + h * a.q_sh + (live ? i : 0) * a.q_ss;
  const T* kb = k + b * a.k_sb + hk * a.k_sh;
  const T* vb = v + b * a.v_sb + hk * a.v_sh;
  float qv[kSlice], acc[kSlice];
#pragma unroll
  for (int t = 0; t < kSlice; ++t) {
    const int d = sub + t * kFlashSplit;
    qv[t] = live && d < a.d ? float(qr[d]) * a.scale : 0.f;
    acc[t] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  // Keys past the block's last visible one (causal) are never loaded.
  int64_t kv_end = a.seq_kv;
  if (a.causal) {
    const int64_t last = static_cast<int64_t>(blockIdx.x) * kFlashRows + kFlashRows - 1;
    const int64_t lim = last + a.causal_offset + 1;
    if (lim < kv_end) kv_end = lim < 0 ? 0 : lim;
  }
  for (int64_t j0 = 0; j0 < kv_end; j0 += kFlashKeys) {
    const int64_t nk = kv_end - j0 < kFlashKeys ? kv_end - j0 : kFlashKeys;
    __syncthreads();
    for (int e = tid; e < kFlashKeys * kFlashMaxDim; e += blockDim.x) {
      const int r = e / kFlashMaxDim, d = e % kFlashMaxDim;
      const bool in = r < nk;
      ks[r][d] = in && d < a.d ? float(kb[(j0 + r) * a.k_ss + d]) : 0.f;
      vs[r][d] = in && d < a.dv ? float(vb[(j0 + r) * a.v_ss + d]) : 0.f;
    }
    __syncthreads();
    for (int r = 0; r < nk; ++r) {
      float part = 0.f;
#pragma unroll
      for (int t = 0; t < kSlice; ++t) part += qv[t] * ks[r][sub + t * kFlashSplit];
      part += __shfl_xor_sync(0xffffffffu, part, 1);
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      if (!live) continue;
      const float s = finish_score(a, mask, part, b, h, i, j0 + r);
      float p;
      const float corr = online_update(m, l, s, p);
#pragma unroll
      for (int t = 0; t < kSlice; ++t) acc[t] = acc[t] * corr + p * vs[r][sub + t * kFlashSplit];
    }
  }
  if (!live) return;
  T* yr = y + b * a.y_sb + h * a.y_sh + i * a.y_ss;
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int t = 0; t < kSlice; ++t) {
    const int d = sub + t * kFlashSplit;
    if (d < a.dv) yr[d] = T(acc[t] * inv);
  }
}

constexpr int kMemEffMaxDim = 256;
constexpr int kLanes = 32;
constexpr int kPerLane = kMemEffMaxDim / kLanes;
constexpr int kWarpsPerBlock = 8;

template <class T>
__global__ void mem_efficient_kernel(AttnDesc a, const T* q, const T* k, const T* v,
                                     const void* mask, T* y) {
  const int lane = threadIdx.x & 31;
  const int64_t rowid = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t rows = a.batch * a.q_heads * a.seq_q;
  if (rowid >= rows) return;
  const int64_t i = rowid % a.seq_q, bh = rowid / a.seq_q;
  const int64_t b = bh / a.q_heads, h = bh % a.q_heads;
  const int64_t hk = h / (a.q_heads / a.kv_heads);
  const T* qr = q + b * a.q_sb + h * a.q_sh + i * a.q_ss;
  const T* kb = k + b * a.k_sb + hk * a.k_sh;
  const T* vb = v + b * a.v_sb + hk * a.v_sh;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + t * kLanes;
    qv[t] = d < a.d ? float(qr[d]) * a.scale : 0.f;
    acc[t] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  int64_t kv_end = a.seq_kv;
  if (a.causal && i + a.causal_offset + 1 < kv_end) {
    kv_end = i + a.causal_offset + 1 < 0 ? 0 : i + a.causal_offset + 1;
  }
  for (int64_t j = 0; j < kv_end; ++j) {
    const T* kr = kb + j * a.k_ss;
    float part = 0.f;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int d = lane + t * kLanes;
      if (d < a.d) part += qv[t] * float(kr[d]);
    }
    const float s = finish_score(a, mask, warp_sum(part), b, h, i, j);
    float p;
    const float corr = online_update(m, l, s, p);
    if (p == 0.f && corr == 1.f) continue;
    const T* vr = vb + j * a.v_ss;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int d = lane + t * kLanes;
      acc[t] = acc[t] * corr + (d < a.dv ? p * float(vr[d]) : 0.f);
    }
  }
  T* yr = y + b * a.y_sb + h * a.y_sh + i * a.y_ss;
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int d = lane + t * kLanes;
    if (d < a.dv) yr[d] = T(acc[t] * inv);
  }
}

// One block per score row: [batch * q_heads * seq_q] rows of seq_kv.
__global__ void scores_softmax_kernel(AttnDesc a, float* scores, const void* mask) {
  __shared__ float shared[32];
  const int64_t rowid = blockIdx.x;
  const int64_t i = rowid % a.seq_q, bh = rowid / a.seq_q;
  const int64_t b = bh / a.q_heads, h = bh % a.q_heads;
  float* row = scores + rowid * a.seq_kv;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < a.seq_kv; j += blockDim.x) {
    const float s = finish_score(a, mask, row[j], b, h, i, j);
    row[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_reduce<true>(mx, shared);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < a.seq_kv; j += blockDim.x) {
    const float e = mx == -INFINITY ? 0.f : expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, shared);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (int64_t j = threadIdx.x; j < a.seq_kv; j += blockDim.x) row[j] *= inv;
}

template <class T>
cudaError_t launch_flash(const AttnDesc& a, const void* q, const void* k, const void* v,
                         const void* mask, void* y, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((a.seq_q + kFlashRows - 1) / kFlashRows),
                  static_cast<unsigned>(a.batch * a.q_heads));
  flash_kernel<T><<<grid, kFlashRows * kFlashSplit, 0, s>>>(
      a, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), mask,
      static_cast<T*>(y));
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_mem_efficient(const AttnDesc& a, const void* q, const void* k, const void* v,
                                 const void* mask, void* y, cudaStream_t s) {
  const int64_t rows = a.batch * a.q_heads * a.seq_q;
  const unsigned grid = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  mem_efficient_kernel<T><<<grid, kWarpsPerBlock * kLanes, 0, s>>>(
      a, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), mask,
      static_cast<T*>(y));
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_flash(const AttnDesc& a, const void* q, const void* k, const void* v,
                            const void* mask, void* y, cudaStream_t s) {
  if (a.batch * a.q_heads * a.seq_q == 0) return cudaSuccess;
  if (a.d > kFlashMaxDim || a.dv > kFlashMaxDim || a.batch * a.q_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  if (a.t == Elem::kF32) return launch_flash<float>(a, q, k, v, mask, y, s);
  if (a.t == Elem::kF16) return launch_flash<__half>(a, q, k, v, mask, y, s);
  return cudaErrorInvalidValue;
}

cudaError_t attention_mem_efficient(const AttnDesc& a, const void* q, const void* k, const void* v,
                                    const void* mask, void* y, cudaStream_t s) {
  if (a.batch * a.q_heads * a.seq_q == 0) return cudaSuccess;
  if (a.d > kMemEffMaxDim || a.dv > kMemEffMaxDim) return cudaErrorInvalidValue;
  if (a.t == Elem::kF32) return launch_mem_efficient<float>(a, q, k, v, mask, y, s);
  if (a.t == Elem::kF16) return launch_mem_efficient<__half>(a, q, k, v, mask, y, s);
  return cudaErrorInvalidValue;
}

cudaError_t attention_scores_softmax(const AttnDesc& a, float* scores, const void* mask,
                                     cudaStream_t s) {
  const int64_t rows = a.batch * a.q_heads * a.seq_q;
  if (rows == 0 || a.seq_kv == 0) return cudaSuccess;
  scores_softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(a, scores, mask);
  return cudaGetLastError();
}

}  // namespace tern::cuda
