// Data movement and windows: strided copies (Transpose, Slice, Expand), Gather, Resize and
// pooling.
#include "backends/cuda/kernels/common.cuh"

namespace tern::cuda {

namespace {

template <class T>
__global__ void strided_kernel(const T* src, T* dst, int64_t n, Strided d) {
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    int64_t rem = i, off = d.offset;
    for (int k = d.rank - 1; k >= 0; --k) {
      off += (rem % d.shape[k]) * d.strides[k];
      rem /= d.shape[k];
    }
    dst[i] = src[off];
  }
}

template <class T>
cudaError_t launch_strided(const void* src, void* dst, const Strided& d, cudaStream_t s) {
  int64_t n = 1;
  for (int k = 0; k < d.rank; ++k) n *= d.shape[k];
  if (n == 0) return cudaSuccess;
  strided_kernel<T>
      <<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(src), static_cast<T*>(dst), n, d);
  return cudaGetLastError();
}

template <class T, class I>
__global__ void gather_kernel(const T* data, const I* idx, T* y, int64_t outer, int64_t axis,
                              int64_t n, int64_t inner, unsigned* error) {
  const int64_t total = outer * n * inner;
  for (int64_t i = grid_index(); i < total; i += grid_stride()) {
    const int64_t in = i % inner;
    const int64_t j = (i / inner) % n;
    const int64_t o = i / (inner * n);
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += axis;
    if (k >= 0 && k < axis) {
      y[i] = data[(o * axis + k) * inner + in];
    } else {
      y[i] = T(0);
      atomicOr(error, 1u);
    }
  }
}

template <class T>
cudaError_t launch_gather(const void* data, const void* indices, bool i64, void* y, int64_t outer,
                          int64_t axis, int64_t n, int64_t inner, unsigned* error, cudaStream_t s) {
  const int64_t total = outer * n * inner;
  if (total == 0) return cudaSuccess;
  if (i64) {
    gather_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, s>>>(
        static_cast<const T*>(data), static_cast<const int64_t*>(indices), static_cast<T*>(y),
        outer, axis, n, inner, error);
  } else {
    gather_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, s>>>(
        static_cast<const T*>(data), static_cast<const int32_t*>(indices), static_cast<T*>(y),
        outer, axis, n, inner, error);
  }
  return cudaGetLastError();
}

template <class T>
__global__ void resize_kernel(bool linear, const T* x, T* y, int64_t planes, int64_t ih, int64_t iw,
                              int64_t oh, int64_t ow, const int64_t* h0, const int64_t* h1,
                              const float* hw, const int64_t* w0, const int64_t* w1,
                              const float* ww) {
  const int64_t total = planes * oh * ow;
  for (int64_t i = grid_index(); i < total; i += grid_stride()) {
    const int64_t c = i % ow, r = (i / ow) % oh, p = i / (ow * oh);
    const T* xp = x + p * ih * iw;
    if (!linear) {
      y[i] = xp[h0[r] * iw + w0[c]];
      continue;
    }
    const float a = float(xp[h0[r] * iw + w0[c]]), b = float(xp[h0[r] * iw + w1[c]]);
    const float cc = float(xp[h1[r] * iw + w0[c]]), d = float(xp[h1[r] * iw + w1[c]]);
    const float top = a + (b - a) * ww[c];
    const float bot = cc + (d - cc) * ww[c];
    y[i] = T(top + (bot - top) * hw[r]);
  }
}

__global__ void pool_kernel(PoolOp op, const float* x, float* y, Window3 w) {
  const int64_t o0 = w.out[0], o1 = w.out[1], o2 = w.out[2];
  const int64_t total = w.n * w.c * o0 * o1 * o2;
  for (int64_t i = grid_index(); i < total; i += grid_stride()) {
    const int64_t x2 = i % o2, x1 = (i / o2) % o1, x0 = (i / (o2 * o1)) % o0;
    const int64_t nc = i / (o2 * o1 * o0);
    const float* plane = x + nc * w.in[0] * w.in[1] * w.in[2];
    float acc = op == PoolOp::kMax ? -INFINITY : 0.f;
    int64_t count = 0;
    for (int64_t k0 = 0; k0 < w.k[0]; ++k0) {
      const int64_t i0 = x0 * w.stride[0] - w.pad[0] + k0 * w.dil[0];
      for (int64_t k1 = 0; k1 < w.k[1]; ++k1) {
        const int64_t i1 = x1 * w.stride[1] - w.pad[1] + k1 * w.dil[1];
        for (int64_t k2 = 0; k2 < w.k[2]; ++k2) {
          const int64_t i2 = x2 * w.stride[2] - w.pad[2] + k2 * w.dil[2];
          const bool inside =
              i0 >= 0 && i0 < w.in[0] && i1 >= 0 && i1 < w.in[1] && i2 >= 0 && i2 < w.in[2];
          if (!inside) {
            // Average including pads counts pad positions inside the padded input only.
            if (op == PoolOp::kAvgIncludePad && i0 < w.in[0] + w.pad_end[0] &&
                i1 < w.in[1] + w.pad_end[1] && i2 < w.in[2] + w.pad_end[2]) {
              ++count;
            }
            continue;
          }
          const float v = plane[(i0 * w.in[1] + i1) * w.in[2] + i2];
          if (op == PoolOp::kMax) {
            acc = isnan(v) ? v : fmaxf(acc, v);
          } else if (op == PoolOp::kLp2) {
            acc += v * v;
          } else {
            acc += v;
          }
          ++count;
        }
      }
    }
    if (op == PoolOp::kLp2) {
      acc = sqrtf(acc);
    } else if (op != PoolOp::kMax) {
      acc = count ? acc / static_cast<float>(count) : 0.f;
    }
    y[i] = acc;
  }
}

}  // namespace

cudaError_t strided_copy(int elem_size, const void* src, void* dst, const Strided& d,
                         cudaStream_t s) {
  switch (elem_size) {
    case 1:
      return launch_strided<uint8_t>(src, dst, d, s);
    case 2:
      return launch_strided<uint16_t>(src, dst, d, s);
    case 4:
      return launch_strided<uint32_t>(src, dst, d, s);
    case 8:
      return launch_strided<uint64_t>(src, dst, d, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t gather(int elem_size, const void* data, const void* indices, bool indices64, void* y,
                   int64_t outer, int64_t axis, int64_t n, int64_t inner, unsigned* error,
                   cudaStream_t s) {
  switch (elem_size) {
    case 1:
      return launch_gather<uint8_t>(data, indices, indices64, y, outer, axis, n, inner, error, s);
    case 2:
      return launch_gather<uint16_t>(data, indices, indices64, y, outer, axis, n, inner, error, s);
    case 4:
      return launch_gather<uint32_t>(data, indices, indices64, y, outer, axis, n, inner, error, s);
    case 8:
      return launch_gather<uint64_t>(data, indices, indices64, y, outer, axis, n, inner, error, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t resize2d(int elem_size, bool linear, const void* x, void* y, int64_t planes, int64_t ih,
                     int64_t iw, int64_t oh, int64_t ow, const int64_t* h0, const int64_t* h1,
                     const float* hw, const int64_t* w0, const int64_t* w1, const float* ww,
                     cudaStream_t s) {
  const int64_t total = planes * oh * ow;
  if (total == 0) return cudaSuccess;
  const unsigned g = blocks_for(total);
  if (linear) {
    if (elem_size != 4) return cudaErrorInvalidValue;
    resize_kernel<float><<<g, kThreads, 0, s>>>(true, static_cast<const float*>(x),
                                                static_cast<float*>(y), planes, ih, iw, oh, ow, h0,
                                                h1, hw, w0, w1, ww);
  } else if (elem_size == 4) {
    resize_kernel<uint32_t><<<g, kThreads, 0, s>>>(false, static_cast<const uint32_t*>(x),
                                                   static_cast<uint32_t*>(y), planes, ih, iw, oh,
                                                   ow, h0, h1, hw, w0, w1, ww);
  } else if (elem_size == 8) {
    resize_kernel<uint64_t><<<g, kThreads, 0, s>>>(false, static_cast<const uint64_t*>(x),
                                                   static_cast<uint64_t*>(y), planes, ih, iw, oh,
                                                   ow, h0, h1, hw, w0, w1, ww);
  } else if (elem_size == 2) {
    resize_kernel<uint16_t><<<g, kThreads, 0, s>>>(false, static_cast<const uint16_t*>(x),
                                                   static_cast<uint16_t*>(y), planes, ih, iw, oh,
                                                   ow, h0, h1, hw, w0, w1, ww);
  } else if (elem_size == 1) {
    resize_kernel<uint8_t><<<g, kThreads, 0, s>>>(false, static_cast<const uint8_t*>(x),
                                                  static_cast<uint8_t*>(y), planes, ih, iw, oh, ow,
                                                  h0, h1, hw, w0, w1, ww);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t pool(PoolOp op, const float* x, float* y, const Window3& w, cudaStream_t s) {
  const int64_t total = w.n * w.c * w.out[0] * w.out[1] * w.out[2];
  if (total == 0) return cudaSuccess;
  pool_kernel<<<blocks_for(total), kThreads, 0, s>>>(op, x, y, w);
  return cudaGetLastError();
}

}  // namespace tern::cuda
