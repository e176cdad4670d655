// Attention on the CPU: two kernels, chosen per plan by the sdp flags.
// MATH materialises the scores of every (batch, head) in the workspace: S = scale * Q Kᵀ, a row
// softmax, Y = P V, both products on the panel GEMM (panel_gemm.h) with Kᵀ and V packed per head.
// FLASH never does: each task takes a block of query rows and streams the keys in blocks with an
// online softmax (running max and sum per row), keeping only a (rows x keys) tile and a (rows x
// v_dim) accumulator per thread. Both use the vectorised primitives of the dispatched ISA, whose
// name is part of the kernel name ("flash.avx512"). float16/bfloat16 tensors are widened to float32
// once per call into the workspace (Q, the mask, and K/V with their past in the present layout),
// and the float32 output and present K/V rounded back at the end. Under
// sdp.allow_fp16_bf16_reduction_math MATH rounds its scores and probabilities to the input's type
// too ("math.<isa>.reduced"), as PyTorch's math path in float16 does.
#include "backends/cpu/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/float_rows.h"
#include "backends/cpu/panel_gemm.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"

namespace tern {

namespace {

constexpr int64_t kBlockQ = 32;   // query rows per FLASH task
constexpr int64_t kBlockK = 128;  // keys per FLASH tile
constexpr int64_t kMaxFlashDim = 1024;

struct CpuAttention {
  ops::AttentionParams p;
  const VecOps* vec = nullptr;
  CpuIsa isa = CpuIsa::kScalar;
  int scratch_slots = 1;  // per-thread scratch slots in the workspace
  size_t wide_at = 0;     // bytes into the workspace where the widened operands start
  int64_t mask_numel = 0;
  // sdp.allow_fp16_bf16_reduction_math (MATH, float16/bfloat16 only): the scores and the
  // probabilities are rounded to p.dtype between the steps.
  bool reduce = false;
};

// Rounds n floats to `to` (float16 or bfloat16) and back, in place.
void round_row(DType to, float* x, int64_t n) {
  if (to == DType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) x[i] = half_to_float(float_to_half(x[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = bfloat16_to_float(float_to_bfloat16(x[i]));
  }
}

// float16/bfloat16 operands widened to float32 (floats, each part a multiple of 16): Q and Y in
// their tensors' layouts, K and V (past then new) in the present outputs' layout, a float mask.
struct WideLayout {
  int64_t q = 0, k = 0, v = 0, mask = 0, y = 0;
  size_t bytes() const { return static_cast<size_t>(q + k + v + mask + y) * sizeof(float); }
};
WideLayout wide_layout(const CpuAttention& k) {
  const ops::AttentionParams& p = k.p;
  if (p.dtype == DType::kFloat32) return {};
  auto r16 = [](int64_t n) { return (n + 15) / 16 * 16; };
  const bool float_mask = p.mask == ops::AttentionParams::Mask::kFloat;
  return {r16(p.batch * p.q_heads * p.seq_q * p.head_dim),
          r16(p.batch * p.kv_heads * p.seq_kv * p.head_dim),
          r16(p.batch * p.kv_heads * p.seq_kv * p.v_head_dim), float_mask ? r16(k.mask_numel) : 0,
          r16(p.batch * p.q_heads * p.seq_q * p.v_head_dim)};
}

// The operands of one run; the KV cache is written to the present outputs first.
struct Io {
  ops::KvSource kv;
  const float* q;
  const void* mask;
  float* y;
};

Io begin(const CpuAttention& k, const KernelArgs& a) {
  const ops::AttentionParams& p = k.p;
  const Tensor* mask = a.inputs.size() > 3 ? a.inputs[3] : nullptr;
  if (p.dtype == DType::kFloat32) {
    ops::write_present(p, a);
    return {ops::kv_source(p, a), a.inputs[0]->data<float>(), mask ? mask->raw() : nullptr,
            a.outputs[0]->data<float>()};
  }
  const WideLayout l = wide_layout(k);
  float* q = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + k.wide_at);
  float* kw = q + l.q;
  float* vw = kw + l.k;
  float* mw = vw + l.v;
  float* y = mw + l.mask;
  const Tensor& Q = *a.inputs[0];
  read_f32(Q, 0, Q.numel(), q);
  // K and V: each (batch, KV head) as its past rows, then the new ones.
  auto widen = [&](const Tensor* past, const Tensor& fresh, const ops::HeadView& fv, int64_t dim,
                   float* dst) {
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t h = 0; h < p.kv_heads; ++h) {
        float* d = dst + (b * p.kv_heads + h) * p.seq_kv * dim;
        if (p.past) read_f32(*past, (b * p.kv_heads + h) * p.past * dim, p.past * dim, d);
        for (int64_t s = 0; s < p.seq_kv - p.past; ++s) {
          read_f32(fresh, fv.offset(b, h, s), dim, d + (p.past + s) * dim);
        }
      }
    }
  };
  widen(p.has_past ? a.inputs[4] : nullptr, *a.inputs[1], p.k, p.head_dim, kw);
  widen(p.has_past ? a.inputs[5] : nullptr, *a.inputs[2], p.v, p.v_head_dim, vw);
  const ops::HeadView kv{p.kv_heads * p.seq_kv * p.head_dim, p.seq_kv * p.head_dim, p.head_dim};
  const ops::HeadView vv{p.kv_heads * p.seq_kv * p.v_head_dim, p.seq_kv * p.v_head_dim,
                         p.v_head_dim};
  const void* m = mask ? mask->raw() : nullptr;
  if (p.mask == ops::AttentionParams::Mask::kFloat) {
    read_f32(*mask, 0, mask->numel(), mw);
    m = mw;
  }
  return {{kw, vw, kv, vv}, q, m, y};
}

// float16/bfloat16: the float32 output and present K/V rounded into the outputs.
void finish(const CpuAttention& k, const KernelArgs& a, const Io& io) {
  if (k.p.dtype == DType::kFloat32) return;
  write_f32(io.y, a.outputs[0]->numel(), *a.outputs[0], 0);
  if (k.p.want_present_key) write_f32(io.kv.k, a.outputs[1]->numel(), *a.outputs[1], 0);
  if (k.p.want_present_value) write_f32(io.kv.v, a.outputs[2]->numel(), *a.outputs[2], 0);
}

// Scale, softcap, mask and causal masking of one row of scores for query i, keys [j0, j0 + n).
void finish_scores(const ops::AttentionParams& p, const VecOps& vec, const void* mask, int64_t b,
                   int64_t h, int64_t i, int64_t j0, int64_t n, float* s) {
  if (p.softcap > 0) {
    for (int64_t j = 0; j < n; ++j) s[j] = p.softcap * std::tanh(s[j] / p.softcap);
  }
  if (p.mask == ops::AttentionParams::Mask::kFloat && p.mask_stride[3] == 1 &&
      j0 + n <= p.mask_len) {
    // A float mask row of contiguous keys (the padding masks of encoders): one vector add.
    const float* row = static_cast<const float*>(mask) + b * p.mask_stride[0] +
                       h * p.mask_stride[1] + i * p.mask_stride[2] + j0;
    vec.binary(/*add=*/0, s, 1, row, 1, s, n);
  } else if (p.mask != ops::AttentionParams::Mask::kNone) {
    for (int64_t j = 0; j < n; ++j) s[j] += ops::mask_bias(p, mask, b, h, i, j0 + j);
  }
  if (p.causal) {
    for (int64_t j = std::max<int64_t>(0, i + 1 + p.causal_offset - j0); j < n; ++j) {
      s[j] = -std::numeric_limits<float>::infinity();
    }
  }
}

// exp(s - max) of one finished row of scores in place; returns 1 / the row's sum, 0 when every key
// is masked (the row is then zeros).
float exp_row(const VecOps& vec, float* s, int64_t n) {
  const float mx = vec.max(s, n);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(s, s + n, 0.0f);
    return 0.0f;
  }
  return static_cast<float>(1.0 / vec.exp_sum(s, mx, s, n));
}

// MATH's workspace: the scores of every (batch, head), then each KV head's packed Kᵀ and V.
constexpr int64_t kMathRows = 48;  // query rows per MATH task: a multiple of panel::kTileRows

struct MathLayout {
  // floats: the score rows of one task per thread (reused task after task, so they stay in the
  // core's cache instead of the whole score matrix passing through memory), one head's packed
  // Kᵀ, one head's V
  int64_t scores = 0, kt = 0, v = 0;
  size_t bytes(const ops::AttentionParams& p) const {
    const int64_t kv_heads = p.batch * p.kv_heads;
    return static_cast<size_t>(scores + kv_heads * (kt + v)) * sizeof(float);
  }
};
MathLayout math_layout(const ops::AttentionParams& p, int slots) {
  MathLayout l;
  // (Each part rounded to 16 floats: the panels must stay 64-byte aligned.)
  l.scores = slots * ((kMathRows * p.seq_kv + 15) / 16 * 16);
  l.kt = panel::packed_floats(p.head_dim, p.seq_kv);
  l.v = panel::packed_floats(p.seq_kv, p.v_head_dim);
  return l;
}

Status run_math(const CpuAttention& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::AttentionParams& p = k.p;
  const VecOps& vec = *k.vec;
  const Io io = begin(k, a);
  const ops::KvSource& kv = io.kv;
  const MathLayout l = math_layout(p, k.scratch_slots);
  const int64_t slot_floats = l.scores / k.scratch_slots;
  float* scores = static_cast<float*>(a.workspace);
  float* packed = scores + l.scores;
  const int64_t kv_heads = p.batch * p.kv_heads;
  // Each KV head's Kᵀ (head_dim x seq_kv) and V (seq_kv x v_head_dim) in panels, once.
  parallel_for(kv_heads, 1, exec.num_threads, [&](int64_t h0, int64_t h1) {
    for (int64_t bh = h0; bh < h1; ++bh) {
      const int64_t b = bh / p.kv_heads, hk = bh % p.kv_heads;
      float* kt = packed + bh * (l.kt + l.v);
      panel::pack(kv.k + kv.kv.offset(b, hk, 0), p.head_dim, p.seq_kv, 1, kv.kv.stride_s, kt);
      panel::pack(kv.v + kv.vv.offset(b, hk, 0), p.seq_kv, p.v_head_dim, kv.vv.stride_s, 1,
                  kt + l.kt);
    }
  });
  // Per (head, block of query rows): S = scale * Q Kᵀ, the row softmax, Y = P V.
  const int64_t blocks = (p.seq_q + kMathRows - 1) / kMathRows;
  const int64_t s_panels = (p.seq_kv + panel::kPanel - 1) / panel::kPanel;
  const int64_t y_panels = (p.v_head_dim + panel::kPanel - 1) / panel::kPanel;
  const int threads = std::min(exec.num_threads, k.scratch_slots);
  parallel_for_slots(
      p.batch * p.q_heads * blocks, 1, threads, [&](int slot, int64_t t0, int64_t t1) {
        float* s = scores + slot * slot_floats;  // row i of the task is row i - i0 here
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t bh = t / blocks, blk = t % blocks;
          const int64_t b = bh / p.q_heads, h = bh % p.q_heads, hk = h / p.group();
          const int64_t i0 = blk * kMathRows, rows = std::min(p.seq_q, i0 + kMathRows) - i0;
          const float* kt = packed + (b * p.kv_heads + hk) * (l.kt + l.v);
          const panel::Epilogue scaled{nullptr, p.scale, false};
          panel::multiply(k.isa, io.q + p.q.offset(b, h, 0) + i0 * p.q.stride_s, p.q.stride_s, kt,
                          p.head_dim, p.seq_kv, s, p.seq_kv, scaled, 0, rows, 0, s_panels);
          // exp(s - max) per row; the division by the row's sum is left for the output row, which
          // is v_head_dim wide rather than seq_kv (one pass over the scores fewer).
          float inv_sum[kMathRows];
          for (int64_t r = 0; r < rows; ++r) {
            float* row = s + r * p.seq_kv;
            if (k.reduce) round_row(p.dtype, row, p.seq_kv);
            finish_scores(p, vec, io.mask, b, h, i0 + r, 0, p.seq_kv, row);
            if (k.reduce) round_row(p.dtype, row, p.seq_kv);
            inv_sum[r] = exp_row(vec, row, p.seq_kv);
            if (k.reduce) {  // the probabilities themselves, normalised, in p.dtype
              vec.scale(row, inv_sum[r], p.seq_kv);
              round_row(p.dtype, row, p.seq_kv);
              inv_sum[r] = 1.0f;
            }
          }
          float* y = io.y + p.y.offset(b, h, 0) + i0 * p.y.stride_s;
          panel::multiply(k.isa, s, p.seq_kv, kt + l.kt, p.seq_kv, p.v_head_dim, y, p.y.stride_s,
                          panel::Epilogue{}, 0, rows, 0, y_panels);
          for (int64_t r = 0; r < rows; ++r)
            vec.scale(y + r * p.y.stride_s, inv_sum[r], p.v_head_dim);
        }
      });
  finish(k, a, io);
  return Status::ok();
}

// FLASH's scratch per thread, in the workspace (planned and charged with the run's memory): one
// score tile, one output accumulator, the running max and sum; a multiple of 64 bytes.
size_t flash_slot_floats(const ops::AttentionParams& p) {
  return static_cast<size_t>(kBlockQ * (kBlockK + p.v_head_dim + 2) + 15) / 16 * 16;
}

Status run_flash(const CpuAttention& k, const KernelArgs& a, const ExecContext& exec) {
  const ops::AttentionParams& p = k.p;
  const VecOps& vec = *k.vec;
  const Io io = begin(k, a);
  const ops::KvSource& kv = io.kv;
  const float* q = io.q;
  const void* mask = io.mask;
  float* y = io.y;
  const int64_t qblocks = (p.seq_q + kBlockQ - 1) / kBlockQ;
  const int64_t tasks = p.batch * p.q_heads * qblocks;
  const int threads = std::min(exec.num_threads, k.scratch_slots);
  parallel_for_chunks(tasks, 1, threads, [&](int64_t chunk, int64_t t0, int64_t t1) {
    float* s = static_cast<float*>(a.workspace) + static_cast<size_t>(chunk) * flash_slot_floats(p);
    float* o = s + kBlockQ * kBlockK;
    float* m = o + kBlockQ * p.v_head_dim;
    float* l = m + kBlockQ;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / qblocks, qb = t % qblocks;
      const int64_t b = bh / p.q_heads, h = bh % p.q_heads, hk = h / p.group();
      const int64_t i0 = qb * kBlockQ, rows = std::min(kBlockQ, p.seq_q - i0);
      std::fill(o, o + rows * p.v_head_dim, 0.0f);
      std::fill(m, m + rows, -std::numeric_limits<float>::infinity());
      std::fill(l, l + rows, 0.0f);
      // Causal: keys after the block's last row are never seen.
      const int64_t kv_end = p.causal ? std::min(p.seq_kv, i0 + rows + p.causal_offset) : p.seq_kv;
      for (int64_t j0 = 0; j0 < kv_end; j0 += kBlockK) {
        const int64_t cols = std::min(kBlockK, kv_end - j0);
        // Tile scores S = scale * Q Kᵀ on this thread (the task is already one of many).
        cpu_sgemm(
            GemmShape{false, true, rows, cols, p.head_dim, p.q.stride_s, kv.kv.stride_s, kBlockK},
            p.scale, q + p.q.offset(b, h, i0), kv.k + kv.kv.offset(b, hk, j0), 0.0f, s,
            /*threads=*/1, /*deterministic=*/false);
        for (int64_t r = 0; r < rows; ++r) {
          float* sr = s + r * kBlockK;
          finish_scores(p, vec, mask, b, h, i0 + r, j0, cols, sr);
          const float tile_max = vec.max(sr, cols);
          const float m_new = std::max(m[r], tile_max);
          if (m_new == -std::numeric_limits<float>::infinity()) {  // all masked so far
            std::fill(sr, sr + cols, 0.0f);
            continue;
          }
          const float correction = std::exp(m[r] - m_new);  // 0 when m[r] was -inf
          const double tile_sum = vec.exp_sum(sr, m_new, sr, cols);
          l[r] = static_cast<float>(l[r] * correction + tile_sum);
          m[r] = m_new;
          if (correction != 1.0f) vec.scale(o + r * p.v_head_dim, correction, p.v_head_dim);
        }
        // O += P V for the tile.
        cpu_sgemm(GemmShape{false, false, rows, p.v_head_dim, cols, kBlockK, kv.vv.stride_s,
                            p.v_head_dim},
                  1.0f, s, kv.v + kv.vv.offset(b, hk, j0), 1.0f, o, /*threads=*/1,
                  /*deterministic=*/false);
      }
      for (int64_t r = 0; r < rows; ++r) {
        float* yr = y + p.y.offset(b, h, i0 + r);
        const float* orow = o + r * p.v_head_dim;
        const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;  // all keys masked: zeros
        for (int64_t d = 0; d < p.v_head_dim; ++d) yr[d] = orow[d] * inv;
      }
    }
  });
  finish(k, a, io);
  return Status::ok();
}

// Score matrices (every head's queries x keys, which MATH computes task by task) up to this size
// run on MATH when both kernels may (64 MiB: sequence 2048 with 4 heads).
constexpr size_t kMathScoresLimit = size_t{64} << 20;

Expected<std::unique_ptr<Kernel>> make_attention(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::AttentionParams p, ops::parse_attention(ctx));
  if (p.nonpad || p.want_qk) {
    return unsupported(ctx.where, ": nonpad_kv_seqlen and qk_matmul_output run in the reference");
  }
  const ops::SdpCase c = ops::sdp_case(p);
  const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
  CpuAttention k{p, &vec_ops(isa), isa};
  if (p.softmax_round != DType::kUndefined) {
    return unsupported(ctx.where, ": softmax_precision float16/bfloat16 runs in the reference");
  }
  if (p.mask == ops::AttentionParams::Mask::kFloat) k.mask_numel = numel(ctx.inputs[3].shape);
  // The widened operands follow the kernel's own scratch (64-byte aligned).
  auto with_wide = [&](size_t scratch) {
    k.wide_at = (scratch + 63) / 64 * 64;
    return k.wide_at + wide_layout(k).bytes();
  };
  std::string why_flash = ctx.flag(FlagId::kSdpFlash) ? cpu_sdp_refusal(CpuSdp::kFlash, c)
                                                      : "disabled (sdp.flash_enabled)";
  std::string why_math = ctx.flag(FlagId::kSdpMath) ? cpu_sdp_refusal(CpuSdp::kMath, c)
                                                    : "disabled (sdp.math_enabled)";
  const size_t scores =
      static_cast<size_t>(p.batch * p.q_heads * p.seq_q * p.seq_kv) * sizeof(float);
  // MATH (two batched GEMMs around the softmax) is the faster of the two on the CPU wherever its
  // score matrix fits (4 heads x 64 dims at 1 thread, sequence 128 / 512 / 1024: 0.27 / 3.98 /
  // 17.5 ms against FLASH's 0.37 / 4.88 / 19.0); FLASH, which never holds the scores, takes over
  // when they would pass kMathScoresLimit, or when MATH is off.
  const bool prefer_math = why_math.empty() && scores <= kMathScoresLimit;
  if (why_flash.empty() && !prefer_math) {
    k.scratch_slots = std::max(1, static_cast<int>(ctx.flag(FlagId::kNumThreads)));
    const size_t bytes =
        with_wide(static_cast<size_t>(k.scratch_slots) * flash_slot_floats(p) * sizeof(float));
    return make_kernel(str_cat("flash.", k.vec->isa), k, run_flash, bytes);
  }
  if (why_math.empty()) {
    k.reduce = p.dtype != DType::kFloat32 && ctx.flag(FlagId::kSdpFp16Bf16ReductionMath) != 0;
    k.scratch_slots = std::max(1, static_cast<int>(ctx.flag(FlagId::kNumThreads)));
    const size_t bytes = with_wide(math_layout(p, k.scratch_slots).bytes(p));
    return make_kernel(str_cat("math.", k.vec->isa, k.reduce ? ".reduced" : ""), k, run_math,
                       bytes);
  }
  return invalid_argument(ctx.where,
                          ": no enabled scaled-dot-product attention backend can run it on the "
                          "CPU: FLASH: ",
                          why_flash, "; MATH: ", why_math);
}

}  // namespace

std::string cpu_sdp_refusal(CpuSdp kernel, const ops::SdpCase& c) {
  if (c.dtype != DType::kFloat32 && c.dtype != DType::kFloat16 && c.dtype != DType::kBFloat16) {
    return str_cat("dtype ", dtype_name(c.dtype),
                   " (the CPU kernels take float32, float16 and bfloat16)");
  }
  if (c.dropout > 0) return "dropout_p > 0 (inference kernels do not apply dropout)";
  if (c.batch < 0 || c.heads < 0 || c.seq_q < 0 || c.seq_kv < 0 || c.head_dim < 0) {
    return "negative sizes";
  }
  if (kernel == CpuSdp::kFlash && c.head_dim > kMaxFlashDim) {
    return str_cat("head_dim ", c.head_dim, " > ", kMaxFlashDim);
  }
  if (kernel == CpuSdp::kMath) {
    const double bytes = 4.0 * static_cast<double>(c.batch) * static_cast<double>(c.heads) *
                         static_cast<double>(c.seq_q) * static_cast<double>(c.seq_kv);
    if (bytes > static_cast<double>(int64_t{1} << 40)) {
      return str_cat("the score matrix would take ", bytes, " bytes");
    }
  }
  return "";
}

TERN_REGISTRATION void register_cpu_attention(KernelRegistry& r) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    r.add("Attention", "cpu", t, make_attention);
  }
}

}  // namespace tern
