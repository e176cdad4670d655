// The CUDA kernels' host entry points. The .cu files that define them see only this header and
// the CUDA runtime (nvcc never compiles the engine's C++20 headers); the kernel factories in
// backends/cuda/ops/ translate ops' params into these plain descriptions. Every launcher queues
// its work on `stream` and returns the launch's error (cudaSuccess when queued).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace tern::cuda {

constexpr int kMaxDims = 8;

enum class Elem : int { kF32, kF16, kBF16, kI32, kI64, kU8, kBool };

// y = a op b with numpy broadcasting: strides are in elements, 0 along broadcast dims.
enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kPRelu };
struct Broadcast {
  int rank = 0;
  int64_t shape[kMaxDims] = {};  // output shape
  int64_t a[kMaxDims] = {}, b[kMaxDims] = {};
  bool same = false;  // a, b and y are contiguous of one shape: no index arithmetic
};
cudaError_t binary(BinaryOp op, Elem t, const void* a, const void* b, void* y, int64_t n,
                   const Broadcast& d, cudaStream_t s);

// A chain of element-wise activations applied in order (FusedConv's epilogue, unary ops,
// GEMM epilogues cuBLASLt has no exact form of).
enum class Act : int {
  kIdentity,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kAffine,
  kGeluErf,
  kGeluTanh,
  kErf,
  kSqrt,
  kExp,
  kLog,
  kNeg,
  kAbs,
  kReciprocal,
  kSoftplus,
  kElu,
  kCeil,
  kFloor,
  kRound,
  kSin,
  kCos,
  kSign,
  kSelu,
  kMish,
  kSwish  // x * sigmoid(p0 x)
};
struct ActStep {
  Act act = Act::kIdentity;
  float p0 = 0, p1 = 0;
};
constexpr int kMaxActs = 4;
struct ActChain {
  int n = 0;
  ActStep steps[kMaxActs];
};
// y = chain(x) over n elements (float32 or float16).
cudaError_t unary(const ActChain& c, Elem t, const void* x, void* y, int64_t n, cudaStream_t s);
// y[i] = chain(y[i] + bias[channel(i)] + residual[i]) where channel(i) = (i / inner) % channels;
// bias and residual may be null. Float32.
cudaError_t bias_act(float* y, const float* bias, const float* residual, int64_t n,
                     int64_t channels, int64_t inner, const ActChain& c, cudaStream_t s);
// Element-wise type conversion.
cudaError_t cast(Elem from, Elem to, const void* x, void* y, int64_t n, cudaStream_t s);
// Inference batch norm over [N, C, inner]: y = (x - mean) / sqrt(var + eps) * scale + bias.
cudaError_t batch_norm(const float* x, const float* scale, const float* bias, const float* mean,
                       const float* var, float* y, int64_t n, int64_t channels, int64_t inner,
                       float eps, cudaStream_t s);

// Reduction of x viewed as [outer, r, inner] over r.
enum class ReduceOp : int { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSumExp };
cudaError_t reduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t r, int64_t inner,
                   cudaStream_t s);
// Softmax (or LogSoftmax) of x viewed as [outer, n, inner] along n; float32 or float16.
cudaError_t softmax(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                    bool log, cudaStream_t s);
// Layer normalisation of rows of n: y = (x - mean) / sqrt(var + eps) * scale + bias, with scale
// and bias of n values (bias may be null). Float32.
cudaError_t layer_norm(const float* x, const float* scale, const float* bias, float* y,
                       int64_t rows, int64_t n, float eps, cudaStream_t s);

// y[i] = src[offset + sum_d idx_d(i) * strides[d]] over the output shape (Transpose, Slice,
// Expand, Tile-free copies); elem_size is 1, 2, 4 or 8 bytes.
struct Strided {
  int rank = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // source strides in elements, may be 0 or negative
  int64_t offset = 0;
};
cudaError_t strided_copy(int elem_size, const void* src, void* dst, const Strided& d,
                         cudaStream_t s);
// Gather along an axis: data [outer, axis, inner], indices of n (int64 or int32; negative count
// from the end), y [outer, n, inner]. An index out of range writes zeros and sets bit 1 of
// *error (the thread's device error word).
cudaError_t gather(int elem_size, const void* data, const void* indices, bool indices64, void* y,
                   int64_t outer, int64_t axis, int64_t n, int64_t inner, unsigned* error,
                   cudaStream_t s);
// Resize of [planes, IH, IW] to [planes, OH, OW] with per-row and per-column taps: source
// indices h0/h1 (w0/w1) and the weight of the second (0 for nearest).
cudaError_t resize2d(int elem_size, bool linear, const void* x, void* y, int64_t planes, int64_t ih,
                     int64_t iw, int64_t oh, int64_t ow, const int64_t* h0, const int64_t* h1,
                     const float* hw, const int64_t* w0, const int64_t* w1, const float* ww,
                     cudaStream_t s);

// Windows with up to three spatial dims (leading dims 1 when fewer), as ops::as_3d gives them.
struct Window3 {
  int64_t n = 0, c = 0;  // batch, channels (in)
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t pad_end[3] = {0, 0, 0};
};
enum class PoolOp : int { kMax, kAvgIncludePad, kAvgExcludePad, kLp2 };
cudaError_t pool(PoolOp op, const float* x, float* y, const Window3& w, cudaStream_t s);
// Direct convolution (cudnn.enabled = false): y [N, M, out] = x [N, C, in] * w [M, C/g, k] + b.
cudaError_t conv_direct(const float* x, const float* w, const float* b, float* y,
                        const Window3& win, int64_t m, int64_t group, cudaStream_t s);
// Transposed convolution: y [N, M, out] from x [N, C, in], w [C, M/g, k]; in/out as
// ConvTranspose defines them (stride, pads, dilations, output padding already in out).
cudaError_t conv_transpose_direct(const float* x, const float* w, const float* b, float* y,
                                  const Window3& win, int64_t m, int64_t group, cudaStream_t s);

// Scaled-dot-product attention over (batch, heads) of q [seq_q, d], k/v [seq_kv, d/dv] with
// strided heads (element strides per batch, head and row; rows contiguous).
struct AttnDesc {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, d = 0, dv = 0;
  int64_t q_sb = 0, q_sh = 0, q_ss = 0;
  int64_t k_sb = 0, k_sh = 0, k_ss = 0;
  int64_t v_sb = 0, v_sh = 0, v_ss = 0;
  int64_t y_sb = 0, y_sh = 0, y_ss = 0;
  float scale = 1, softcap = 0;
  bool causal = false;
  int64_t causal_offset = 0;  // query i sees keys j <= i + causal_offset
  int mask = 0;               // 0 none, 1 bool (false hides), 2 additive float
  int64_t m_sb = 0, m_sh = 0, m_si = 0, m_sj = 0;
  int64_t mask_len = INT64_MAX;  // keys at or past it are hidden
  Elem t = Elem::kF32;           // q, k, v, y dtype (float32 or float16); mask float32
};
// FLASH: a block per (batch, head, 64 query rows); key/value tiles in shared memory, online
// softmax; d, dv <= 128.
cudaError_t attention_flash(const AttnDesc& a, const void* q, const void* k, const void* v,
                            const void* mask, void* y, cudaStream_t s);
// MEM_EFFICIENT: a warp per query row streaming the keys with an online softmax; d, dv <= 256.
cudaError_t attention_mem_efficient(const AttnDesc& a, const void* q, const void* k, const void* v,
                                    const void* mask, void* y, cudaStream_t s);
// MATH's middle step: scores [batch*heads, seq_q, seq_kv] (already scale * Q Kᵀ) get softcap,
// mask and causal masking, then a row softmax, in place. Float32.
cudaError_t attention_scores_softmax(const AttnDesc& a, float* scores, const void* mask,
                                     cudaStream_t s);

}  // namespace tern::cuda
