// LinearAttention on the CPU (float32, float16, bfloat16; float32 state and sums). The recurrence
// never mixes the state's columns (each value dim m has its own retrieval Sᵀk, update and read),
// so a task owns one (batch, KV head, block of value columns): its slice of the state stays in
// the thread's scratch for the whole sequence, and each token is two passes over its rows (decay +
// retrieval, then write + the reads of every query head of the group), each a row-long
// multiply-add the compiler vectorises. Tasks run on the intra-op threads; float16/bfloat16
// operands are widened to float32 per token as they are read.
#include <algorithm>
#include <cmath>

#include "backends/cpu/float_rows.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "ops/common/op_utils.h"
#include "ops/linear_attention.h"

namespace tern {
namespace {

constexpr int64_t kColumns = 64;  // value columns per task

struct CpuLinearAttention {
  ops::LinearAttentionParams p;
  int slots = 1;
};

// Scratch per slot, in floats (each part a multiple of 16, so every part stays 64-byte aligned).
struct Slot {
  int64_t state, row, heads_row, keys, head_keys;
  int64_t floats() const { return state + 3 * row + heads_row + 2 * keys + head_keys; }
};
int64_t round16(int64_t n) {
  return (n + 15) / 16 * 16;
}
Slot slot_layout(const ops::LinearAttentionParams& p) {
  const int64_t cols = std::min(kColumns, p.dv);
  return {round16(p.dk * cols), round16(cols), round16(p.group() * cols), round16(p.dk),
          round16(p.group() * p.dk)};
}

Status run_linear_attention(const CpuLinearAttention& k, const KernelArgs& a,
                            const ExecContext& exec) {
  const ops::LinearAttentionParams& p = k.p;
  const Tensor& Q = *a.inputs[0];
  const Tensor& K = *a.inputs[1];
  const Tensor& V = *a.inputs[2];
  const Tensor* past = p.has_past ? a.inputs[3] : nullptr;
  const Tensor* G = p.gated() ? a.inputs[4] : nullptr;
  const Tensor* B = p.delta() ? a.inputs[5] : nullptr;
  Tensor& Y = *a.outputs[0];
  Tensor* present = a.outputs.size() > 1 ? a.outputs[1] : nullptr;
  const Slot l = slot_layout(p);
  const int64_t dk = p.dk, dv = p.dv, group = p.group();
  const int64_t col_blocks = (dv + kColumns - 1) / kColumns;
  const int threads = std::min(exec.num_threads, k.slots);
  parallel_for_slots(
      p.batch * p.kv_heads * col_blocks, 1, threads, [&](int slot, int64_t t0, int64_t t1) {
        float* S = static_cast<float*>(a.workspace) + slot * l.floats();
        float* u = S + l.state;      // the token's value row (after the delta correction)
        float* r = u + l.row;        // retrieval Sᵀk
        float* vbuf = r + l.row;     // widened value
        float* o = vbuf + l.row;     // the group's output rows
        float* e = o + l.heads_row;  // exp(decay) per key dim
        float* kbuf = e + l.keys;
        float* qbuf = kbuf + l.keys;
        for (int64_t task = t0; task < t1; ++task) {
          const int64_t bh = task / col_blocks, m0 = (task % col_blocks) * kColumns;
          const int64_t b = bh / p.kv_heads, h = bh % p.kv_heads;
          const int64_t w = std::min(kColumns, dv - m0);  // this task's columns
          const int64_t state_at = bh * dk * dv + m0;
          for (int64_t d = 0; d < dk; ++d) {
            float* row = S + d * w;
            if (past) {
              const float* src = read_f32(*past, state_at + d * dv, w, row);
              if (src != row) std::copy(src, src + w, row);
            } else {
              std::fill(row, row + w, 0.0f);
            }
          }
          for (int64_t t = 0; t < p.seq; ++t) {
            const int64_t bt = b * p.seq + t;
            const float* kt = read_f32(K, (bt * p.kv_heads + h) * dk, dk, kbuf);
            const float* vt = read_f32(V, (bt * p.kv_heads + h) * dv + m0, w, vbuf);
            const float* qt = read_f32(Q, (bt * p.q_heads + h * group) * dk, group * dk, qbuf);
            if (G) {
              const int64_t n = p.decay_width();
              const float* g = read_f32(*G, (bt * p.kv_heads + h) * n, n, e);
              if (n == 1) {
                std::fill(e, e + dk, std::exp(g[0]));
              } else {
                for (int64_t d = 0; d < dk; ++d) e[d] = std::exp(g[d]);
              }
            }
            // Pass 1: decay the rows, and gather the retrieval Sᵀk from the decayed state.
            if (B) {
              std::fill(r, r + w, 0.0f);
              for (int64_t d = 0; d < dk; ++d) {
                float* __restrict row = S + d * w;
                if (G) {
                  const float ed = e[d];
                  for (int64_t m = 0; m < w; ++m) row[m] *= ed;
                }
                const float kd = kt[d];
                for (int64_t m = 0; m < w; ++m) r[m] += kd * row[m];
              }
              float widened = 0;
              const int64_t bi = bt * p.beta_heads + (p.beta_heads == 1 ? 0 : h);
              const float beta = *read_f32(*B, bi, 1, &widened);
              for (int64_t m = 0; m < w; ++m) u[m] = beta * (vt[m] - r[m]);
            } else {
              if (G) {
                for (int64_t d = 0; d < dk; ++d) {
                  float* __restrict row = S + d * w;
                  const float ed = e[d];
                  for (int64_t m = 0; m < w; ++m) row[m] *= ed;
                }
              }
              std::copy(vt, vt + w, u);
            }
            // Pass 2: write k uᵀ, and read every query head of the group from the new rows.
            std::fill(o, o + group * w, 0.0f);
            for (int64_t d = 0; d < dk; ++d) {
              float* __restrict row = S + d * w;
              const float kd = kt[d];
              for (int64_t m = 0; m < w; ++m) row[m] += kd * u[m];
              for (int64_t j = 0; j < group; ++j) {
                const float qd = qt[j * dk + d];
                float* __restrict oj = o + j * w;
                for (int64_t m = 0; m < w; ++m) oj[m] += qd * row[m];
              }
            }
            for (int64_t j = 0; j < group; ++j) {
              float* oj = o + j * w;
              for (int64_t m = 0; m < w; ++m) oj[m] *= p.scale;
              write_f32(oj, w, Y, (bt * p.q_heads + h * group + j) * dv + m0);
            }
          }
          if (present) {
            for (int64_t d = 0; d < dk; ++d) write_f32(S + d * w, w, *present, state_at + d * dv);
          }
        }
      });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_linear_attention(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(ops::LinearAttentionParams p, ops::parse_linear_attention(ctx));
  CpuLinearAttention k{p, std::max(1, static_cast<int>(ctx.flag(FlagId::kNumThreads)))};
  const size_t bytes = static_cast<size_t>(k.slots * slot_layout(p).floats()) * sizeof(float);
  return make_kernel("linear_attention", k, run_linear_attention, bytes);
}

}  // namespace

TERN_REGISTRATION void register_cpu_linear_attention(KernelRegistry& r) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    r.add("LinearAttention", "cpu", t, make_linear_attention);
  }
}

}  // namespace tern
