// Tern's own convolution kernels: what runs when cuDNN is disabled (cudnn.enabled = false) and
// transposed convolutions. One thread per output element, accumulating in float.
#include "backends/cuda/kernels/common.cuh"

namespace tern::cuda {

namespace {

// Output element i of [N, M, out0, out1, out2]: its spatial position, channel and batch.
struct OutIndex {
  int64_t x[3], oc, n;
};
__device__ inline OutIndex decode(int64_t i, const Window3& win, int64_t m) {
  OutIndex o;
  o.x[2] = i % win.out[2];
  i /= win.out[2];
  o.x[1] = i % win.out[1];
  i /= win.out[1];
  o.x[0] = i % win.out[0];
  i /= win.out[0];
  o.oc = i % m;
  o.n = i / m;
  return o;
}

__global__ void conv_kernel(const float* x, const float* w, const float* b, float* y, Window3 win,
                            int64_t m, int64_t group) {
  const int64_t total = win.n * m * win.out[0] * win.out[1] * win.out[2];
  const int64_t cg = win.c / group, mg = m / group;
  const int64_t plane = win.in[0] * win.in[1] * win.in[2];
  const int64_t ksize = win.k[0] * win.k[1] * win.k[2];
  for (int64_t i = grid_index(); i < total; i += grid_stride()) {
    const OutIndex o = decode(i, win, m);
    const int64_t x0 = o.x[0], x1 = o.x[1], x2 = o.x[2], oc = o.oc, n = o.n;
    const int64_t g = oc / mg;
    float acc = b ? b[oc] : 0.f;
    for (int64_t c = 0; c < cg; ++c) {
      const float* xp = x + (n * win.c + g * cg + c) * plane;
      const float* wp = w + (oc * cg + c) * ksize;
      for (int64_t k0 = 0; k0 < win.k[0]; ++k0) {
        const int64_t i0 = x0 * win.stride[0] - win.pad[0] + k0 * win.dil[0];
        if (i0 < 0 || i0 >= win.in[0]) continue;
        for (int64_t k1 = 0; k1 < win.k[1]; ++k1) {
          const int64_t i1 = x1 * win.stride[1] - win.pad[1] + k1 * win.dil[1];
          if (i1 < 0 || i1 >= win.in[1]) continue;
          for (int64_t k2 = 0; k2 < win.k[2]; ++k2) {
            const int64_t i2 = x2 * win.stride[2] - win.pad[2] + k2 * win.dil[2];
            if (i2 < 0 || i2 >= win.in[2]) continue;
            acc += xp[(i0 * win.in[1] + i1) * win.in[2] + i2] *
                   wp[(k0 * win.k[1] + k1) * win.k[2] + k2];
          }
        }
      }
    }
    y[i] = acc;
  }
}

// Output position o receives input position i through kernel tap k when
// o = i * stride - pad + k * dil, so i = (o + pad - k * dil) / stride when that divides.
__global__ void conv_transpose_kernel(const float* x, const float* w, const float* b, float* y,
                                      Window3 win, int64_t m, int64_t group) {
  const int64_t total = win.n * m * win.out[0] * win.out[1] * win.out[2];
  const int64_t cg = win.c / group, mg = m / group;
  const int64_t plane = win.in[0] * win.in[1] * win.in[2];
  const int64_t ksize = win.k[0] * win.k[1] * win.k[2];
  for (int64_t i = grid_index(); i < total; i += grid_stride()) {
    const OutIndex o = decode(i, win, m);
    const int64_t x0 = o.x[0], x1 = o.x[1], x2 = o.x[2], oc = o.oc, n = o.n;
    const int64_t g = oc / mg, ocg = oc % mg;
    float acc = b ? b[oc] : 0.f;
    for (int64_t c = 0; c < cg; ++c) {
      const int64_t ic = g * cg + c;
      const float* xp = x + (n * win.c + ic) * plane;
      const float* wp = w + (ic * mg + ocg) * ksize;  // w [C, M/g, k...]
      for (int64_t k0 = 0; k0 < win.k[0]; ++k0) {
        const int64_t t0 = x0 + win.pad[0] - k0 * win.dil[0];
        if (t0 < 0 || t0 % win.stride[0]) continue;
        const int64_t i0 = t0 / win.stride[0];
        if (i0 >= win.in[0]) continue;
        for (int64_t k1 = 0; k1 < win.k[1]; ++k1) {
          const int64_t t1 = x1 + win.pad[1] - k1 * win.dil[1];
          if (t1 < 0 || t1 % win.stride[1]) continue;
          const int64_t i1 = t1 / win.stride[1];
          if (i1 >= win.in[1]) continue;
          for (int64_t k2 = 0; k2 < win.k[2]; ++k2) {
            const int64_t t2 = x2 + win.pad[2] - k2 * win.dil[2];
            if (t2 < 0 || t2 % win.stride[2]) continue;
            const int64_t i2 = t2 / win.stride[2];
            if (i2 >= win.in[2]) continue;
            acc += xp[(i0 * win.in[1] + i1) * win.in[2] + i2] *
                   wp[(k0 * win.k[1] + k1) * win.k[2] + k2];
          }
        }
      }
    }
    y[i] = acc;
  }
}

}  // namespace

cudaError_t conv_direct(const float* x, const float* w, const float* b, float* y,
                        const Window3& win, int64_t m, int64_t group, cudaStream_t s) {
  const int64_t total = win.n * m * win.out[0] * win.out[1] * win.out[2];
  if (total == 0) return cudaSuccess;
  conv_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, w, b, y, win, m, group);
  return cudaGetLastError();
}

cudaError_t conv_transpose_direct(const float* x, const float* w, const float* b, float* y,
                                  const Window3& win, int64_t m, int64_t group, cudaStream_t s) {
  const int64_t total = win.n * m * win.out[0] * win.out[1] * win.out[2];
  if (total == 0) return cudaSuccess;
  conv_transpose_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, w, b, y, win, m, group);
  return cudaGetLastError();
}

}  // namespace tern::cuda
