// LSTM, GRU and RNN on the CPU (float32): the input projection of every step at once as one panel
// GEMM (X Wᵀ plus the biases, all steps and batch entries), then per step one small panel GEMM of
// the state by Rᵀ and the gates fused over the hidden units with the vectorised activations. W and
// R are packed once per session when they are constants (WeightCache), otherwise per run into the
// workspace; no step allocates. A bidirectional layer runs its two directions on two threads.
// Batch entries whose sequence_lens differ are stepped one by one (each with its own length and
// direction order).
#include <algorithm>
#include <cstring>
#include <functional>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/panel_gemm.h"
#include "backends/cpu/vec/vec.h"
#include "core/kernel_registry.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "ops/common/op_utils.h"
#include "ops/recurrent.h"

namespace tern {
namespace {

using ops::RnnActivation;
using ops::RnnKind;
using ops::RnnParams;

constexpr int64_t kRowBlock = 48;  // rows per projection work item (a multiple of kTileRows)
const char* const kWKey = "tern rnn wT p16 v1";
const char* const kRKey = "tern rnn rT p16 v1";

// The packed Rᵀ of one direction: for LSTM and RNN one K=H x N=G*H matrix; for GRU two, the z and
// r gates' (N=2H) then the h gate's (N=H), because the h gate multiplies r ⊙ h.
struct RLayout {
  int64_t first = 0, second = 0;  // floats of each part (second: GRU only)
  int64_t per_dir() const { return first + second; }
};

RLayout r_layout(const RnnParams& p) {
  const int64_t H = p.hidden;
  if (p.kind == RnnKind::kGru) {
    return {panel::packed_floats(H, 2 * H), panel::packed_floats(H, H)};
  }
  return {panel::packed_floats(H, p.gates() * H), 0};
}

int64_t w_floats_per_dir(const RnnParams& p) {
  return panel::packed_floats(p.input, p.gates() * p.hidden);
}

void pack_w(const RnnParams& p, const float* w, float* out) {
  const int64_t GH = p.gates() * p.hidden;
  for (int64_t d = 0; d < p.dirs; ++d) {
    panel::pack(w + d * GH * p.input, p.input, GH, 1, p.input, out + d * w_floats_per_dir(p));
  }
}

void pack_r(const RnnParams& p, const float* r, float* out) {
  const int64_t H = p.hidden, GH = p.gates() * H;
  const RLayout l = r_layout(p);
  for (int64_t d = 0; d < p.dirs; ++d) {
    const float* rd = r + d * GH * H;
    float* o = out + d * l.per_dir();
    if (p.kind == RnnKind::kGru) {
      panel::pack(rd, H, 2 * H, 1, H, o);
      panel::pack(rd + 2 * H * H, H, H, 1, H, o + l.first);
    } else {
      panel::pack(rd, H, GH, 1, H, o);
    }
  }
}

class CpuRecurrent final : public Kernel {
 public:
  const char* name() const override { return name_; }
  size_t workspace_bytes() const override { return layout().total * sizeof(float); }
  size_t packed_bytes() const override {
    return (own_w_ ? w_.data.byte_size() : 0) + (own_r_ ? r_.data.byte_size() : 0);
  }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx, RnnKind kind);

  Status run(const KernelArgs& a, const ExecContext& exec) const override {
    const RnnParams& p = p_;
    const Layout l = layout();
    auto* ws = static_cast<float*>(a.workspace);
    const float* wp = w_ptr_;
    const float* rp = r_ptr_;
    if (!wp) {  // W or R fed at run time: packed into the workspace
      pack_w(p, a.inputs[ops::kRnnW]->data<float>(), ws + l.w);
      wp = ws + l.w;
    }
    if (!rp) {
      pack_r(p, a.inputs[ops::kRnnR]->data<float>(), ws + l.r);
      rp = ws + l.r;
    }
    const Tensor* lens = input(a, ops::kRnnSeqLens);
    for (int64_t b = 0; lens && b < p.batch; ++b) {
      TERN_RETURN_IF_ERROR(ops::rnn_steps(p, lens, b).status());
    }
    project(a, wp, ws + l.bias, ws + l.xw, exec.num_threads);
    Tensor* y = output(a, 0);
    if (y && lens) std::fill(y->data<float>(), y->data<float>() + y->numel(), 0.0f);
    // Directions on threads of their own when there are two of each.
    const int dir_threads = p.dirs > 1 && exec.num_threads > 1 ? 2 : 1;
    parallel_for(p.dirs, 1, dir_threads, [&](int64_t d0, int64_t d1) {
      for (int64_t d = d0; d < d1; ++d) {
        recur(a, d, rp + d * r_layout(p).per_dir(), ws + l.xw, ws + l.dir + d * l.per_dir, lens);
      }
    });
    return Status::ok();
  }

 private:
  // The workspace, in floats: packed W and R (only when fed at run time), the combined bias of
  // the projection and GRU's h-gate recurrent bias per direction, the projections of every
  // direction, and each direction's state and gate scratch.
  struct Layout {
    int64_t w = 0, r = 0, bias = 0, xw = 0, dir = 0, per_dir = 0, total = 0;
  };
  Layout layout() const {
    const RnnParams& p = p_;
    const int64_t H = p.hidden, GH = p.gates() * H, rows = p.seq * p.batch;
    auto up = [](int64_t n) { return (n + 15) / 16 * 16; };  // 64-byte aligned parts
    Layout l;
    int64_t at = 0;
    l.w = at;
    at += w_ptr_ ? 0 : up(w_floats_per_dir(p) * p.dirs);
    l.r = at;
    at += r_ptr_ ? 0 : up(r_layout(p).per_dir() * p.dirs);
    l.bias = at;
    at += up((GH + H) * p.dirs);
    l.xw = at;
    at += up(rows * GH * p.dirs);
    l.dir = at;
    // h, c, gates of the recurrent product (GH), the summed gates (GH), GRU's r ⊙ h and h-gate
    // product: per batch entry.
    l.per_dir = up(p.batch * (2 * H + 2 * GH + 2 * H));
    at += l.per_dir * p.dirs;
    l.total = at;
    return l;
  }

  static const Tensor* input(const KernelArgs& a, size_t i) {
    return i < a.inputs.size() ? a.inputs[i] : nullptr;
  }
  static Tensor* output(const KernelArgs& a, size_t i) {
    return i < a.outputs.size() ? a.outputs[i] : nullptr;
  }

  // xw[d][row] = X[row] Wdᵀ + Wb + Rb (GRU: Rb of z and r only) for every row of X, in X's memory
  // order; bias_out[d] holds the combined bias, then GRU's Rbh.
  void project(const KernelArgs& a, const float* wp, float* bias, float* xw, int threads) const {
    const RnnParams& p = p_;
    const int64_t H = p.hidden, GH = p.gates() * H, rows = p.seq * p.batch;
    const Tensor* B = input(a, ops::kRnnB);
    for (int64_t d = 0; d < p.dirs; ++d) {
      float* bd = bias + d * (GH + H);
      for (int64_t g = 0; g < GH + H; ++g) bd[g] = 0.0f;
      if (!B) continue;
      const float* src = B->data<float>() + d * 2 * GH;
      for (int64_t g = 0; g < GH; ++g) {
        const bool gru_h = p.kind == RnnKind::kGru && g >= 2 * H;
        bd[g] = src[g] + (gru_h ? 0.0f : src[GH + g]);
      }
      if (p.kind == RnnKind::kGru) {
        for (int64_t j = 0; j < H; ++j) bd[GH + j] = src[GH + 2 * H + j];
      }
    }
    const float* X = a.inputs[ops::kRnnX]->data<float>();
    const int64_t panels = (GH + panel::kPanel - 1) / panel::kPanel;
    const int64_t group = panel::panels_per_tile(isa_);
    const int64_t groups = (panels + group - 1) / group;
    const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    const int64_t per_dir = blocks * groups;
    parallel_for(per_dir * p.dirs, 1, threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t d = t / per_dir, blk = (t % per_dir) / groups, grp = t % groups;
        const int64_t r0 = blk * kRowBlock, r1 = std::min(rows, r0 + kRowBlock);
        const int64_t p0 = grp * group, p1 = std::min(panels, p0 + group);
        panel::multiply(isa_, X, p.input, wp + d * w_floats_per_dir(p), p.input, GH,
                        xw + d * rows * GH, GH, panel::Epilogue{bias + d * (GH + H)}, r0, r1, p0,
                        p1);
      }
    });
  }

  void activate(const RnnActivation& act, float* x, int64_t n) const {
    if (p_.clip > 0) {
      for (int64_t i = 0; i < n; ++i) x[i] = std::clamp(x[i], -p_.clip, p_.clip);
    }
    switch (act.fn) {
      case RnnActivation::Fn::kSigmoid:
        return vec_->sigmoid(x, x, n);
      case RnnActivation::Fn::kTanh:
        return vec_->tanh(x, x, n);
      case RnnActivation::Fn::kRelu:
        for (int64_t i = 0; i < n; ++i) x[i] = std::max(0.0f, x[i]);
        return;
      default:
        for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(ops::rnn_activate(act, x[i]));
    }
  }

  // One direction: every step of every batch entry. Entries run together when they share their
  // length (always without sequence_lens); otherwise one at a time.
  void recur(const KernelArgs& a, int64_t d, const float* rp, const float* xw_all, float* scratch,
             const Tensor* lens) const {
    const RnnParams& p = p_;
    const int64_t H = p.hidden, GH = p.gates() * H;
    float* h = scratch;
    float* c = h + p.batch * H;
    const Tensor* h0 = input(a, ops::kRnnInitH);
    const Tensor* c0 = p.kind == RnnKind::kLstm ? input(a, ops::kRnnInitC) : nullptr;
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        h[b * H + j] = h0 ? h0->data<float>()[p.state_row(d, b) + j] : 0.0f;
        c[b * H + j] = c0 ? c0->data<float>()[p.state_row(d, b) + j] : 0.0f;
      }
    }
    bool uniform = true;
    std::vector<int64_t> steps(static_cast<size_t>(p.batch), p.seq);
    for (int64_t b = 0; lens && b < p.batch; ++b) {
      steps[static_cast<size_t>(b)] = lens->int_at(b);
      uniform = uniform && steps[static_cast<size_t>(b)] == p.seq;
    }
    const float* xw = xw_all + d * p.seq * p.batch * GH;
    if (uniform) {
      run_steps(a, d, rp, xw, scratch, 0, p.batch, p.seq);
    } else {
      for (int64_t b = 0; b < p.batch; ++b) {
        run_steps(a, d, rp, xw, scratch, b, b + 1, steps[static_cast<size_t>(b)]);
      }
    }
    Tensor* yh = output(a, 1);
    Tensor* yc = p.kind == RnnKind::kLstm ? output(a, 2) : nullptr;
    for (int64_t b = 0; b < p.batch; ++b) {
      if (yh) std::memcpy(yh->data<float>() + p.state_row(d, b), h + b * H, H * sizeof(float));
      if (yc) std::memcpy(yc->data<float>() + p.state_row(d, b), c + b * H, H * sizeof(float));
    }
  }

  // Steps of batch entries [b0, b1), all `steps` long.
  void run_steps(const KernelArgs& a, int64_t d, const float* rp, const float* xw, float* scratch,
                 int64_t b0, int64_t b1, int64_t steps) const {
    const RnnParams& p = p_;
    const int64_t H = p.hidden, G = p.gates(), GH = G * H, rows = b1 - b0;
    float* h = scratch + b0 * H;
    float* c = scratch + p.batch * H + b0 * H;
    float* hr = scratch + 2 * p.batch * H + b0 * GH;                        // state x Rᵀ
    float* gates = scratch + 2 * p.batch * H + p.batch * GH + b0 * GH;      // all gate inputs
    float* rh = scratch + 2 * p.batch * H + 2 * p.batch * GH + b0 * 2 * H;  // GRU: r ⊙ h, h product
    const auto& act = p.acts[static_cast<size_t>(d)];
    const Tensor* P = p.kind == RnnKind::kLstm ? input(a, ops::kRnnP) : nullptr;
    const float* pd = P ? P->data<float>() + d * 3 * H : nullptr;
    const float* rbh = static_cast<const float*>(a.workspace) + layout().bias + d * (GH + H) + GH;
    Tensor* y = output(a, 0);
    const RLayout rl = r_layout(p);
    const int64_t gh_panels = (GH + panel::kPanel - 1) / panel::kPanel;
    const int64_t zr_panels = (2 * H + panel::kPanel - 1) / panel::kPanel;
    const int64_t h_panels = (H + panel::kPanel - 1) / panel::kPanel;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = p.reversed(d) ? steps - 1 - s : s;
      if (p.kind == RnnKind::kGru) {
        panel::multiply(isa_, h, H, rp, H, 2 * H, hr, GH, panel::Epilogue{}, 0, rows, 0, zr_panels);
      } else {
        panel::multiply(isa_, h, H, rp, H, GH, hr, GH, panel::Epilogue{}, 0, rows, 0, gh_panels);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t b = b0 + r;
        const float* x = xw + ((p.layout == 0 ? t * p.batch + b : b * p.seq + t)) * GH;
        float* g = gates + r * GH;
        const float* q = hr + r * GH;
        float* hb = h + r * H;
        float* cb = c + r * H;
        if (p.kind == RnnKind::kLstm) {
          for (int64_t k = 0; k < GH; ++k) g[k] = x[k] + q[k];
          float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
          if (pd) {
            for (int64_t j = 0; j < H; ++j) gi[j] += pd[j] * cb[j], gf[j] += pd[2 * H + j] * cb[j];
          }
          activate(act[0], gi, H);
          if (p.input_forget) {
            for (int64_t j = 0; j < H; ++j) gf[j] = 1.0f - gi[j];
          } else {
            activate(act[0], gf, H);
          }
          activate(act[1], gc, H);
          for (int64_t j = 0; j < H; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
          if (pd) {
            for (int64_t j = 0; j < H; ++j) go[j] += pd[H + j] * cb[j];
          }
          activate(act[0], go, H);
          std::memcpy(hb, cb, H * sizeof(float));
          activate_plain(act[2], hb, H);
          for (int64_t j = 0; j < H; ++j) hb[j] *= go[j];
        } else if (p.kind == RnnKind::kRnn) {
          for (int64_t j = 0; j < H; ++j) hb[j] = x[j] + q[j];
          activate(act[0], hb, H);
        } else {  // GRU
          for (int64_t k = 0; k < 2 * H; ++k) g[k] = x[k] + q[k];
          float *z = g, *rg = g + H, *hh = g + 2 * H;
          activate(act[0], z, H);
          activate(act[0], rg, H);
          float* rhb = rh + r * 2 * H;  // r ⊙ h (the product's A), then the product
          float* prod = rhb + H;
          if (p.linear_before_reset) {
            panel::multiply(isa_, hb, H, rp + rl.first, H, H, prod, H, panel::Epilogue{rbh}, 0, 1,
                            0, h_panels);
            for (int64_t j = 0; j < H; ++j) hh[j] = x[2 * H + j] + rg[j] * prod[j];
          } else {
            for (int64_t j = 0; j < H; ++j) rhb[j] = rg[j] * hb[j];
            panel::multiply(isa_, rhb, H, rp + rl.first, H, H, prod, H, panel::Epilogue{rbh}, 0, 1,
                            0, h_panels);
            for (int64_t j = 0; j < H; ++j) hh[j] = x[2 * H + j] + prod[j];
          }
          activate(act[1], hh, H);
          for (int64_t j = 0; j < H; ++j) hb[j] = (1.0f - z[j]) * hh[j] + z[j] * hb[j];
        }
        if (y) std::memcpy(y->data<float>() + p.y_row(t, d, b), hb, H * sizeof(float));
      }
    }
  }

  // An activation not preceded by the clip (LSTM's h applies to the cell, which is not clipped).
  void activate_plain(const RnnActivation& act, float* x, int64_t n) const {
    if (act.fn == RnnActivation::Fn::kTanh) return vec_->tanh(x, x, n);
    if (act.fn == RnnActivation::Fn::kSigmoid) return vec_->sigmoid(x, x, n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(ops::rnn_activate(act, x[i]));
  }

  RnnParams p_;
  CpuIsa isa_ = CpuIsa::kScalar;
  const VecOps* vec_ = nullptr;
  PackedData w_, r_;
  const float* w_ptr_ = nullptr;  // null: W is fed at run time and packed into the workspace
  const float* r_ptr_ = nullptr;
  bool own_w_ = false, own_r_ = false;
  const char* name_ = "recurrent";
};

// The packed layout `key` of constant input `i`: the session's copy, or one of the kernel's own.
Expected<PackedData> packed_input(const OpContext& ctx, size_t i, const std::string& key,
                                  size_t floats, const std::function<void(float*)>& fill,
                                  bool* own) {
  const Tensor& w = *ctx.inputs[i].value;
  auto pack = [&]() { return packed_blob(floats, key, fill); };
  *own = !ctx.weights;
  return ctx.weights ? ctx.weights->packed(w, key, pack) : pack();
}

Expected<std::unique_ptr<Kernel>> CpuRecurrent::create(const OpContext& ctx, RnnKind kind) {
  if (ctx.inputs[ops::kRnnX].dtype != DType::kFloat32) {
    return unsupported("the CPU recurrent kernel takes float32");
  }
  TERN_RETURN_IF_ERROR(ops::require_plain_layout(ctx));
  auto k = std::make_unique<CpuRecurrent>();
  TERN_ASSIGN_OR_RETURN(k->p_, ops::parse_rnn(ctx, kind));
  const RnnParams& p = k->p_;
  if (ctx.has_input(ops::kRnnSeqLens) && ctx.inputs[ops::kRnnSeqLens].value) {
    for (int64_t b = 0; b < p.batch; ++b) {
      TERN_RETURN_IF_ERROR(ops::rnn_steps(p, ctx.inputs[ops::kRnnSeqLens].value, b).status());
    }
  }
  k->isa_ = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
  k->vec_ = &vec_ops(k->isa_);
  k->name_ = k->isa_ == CpuIsa::kAvx512 ? "recurrent.avx512"
             : k->isa_ == CpuIsa::kAvx2 ? "recurrent.avx2"
                                        : "recurrent";
  if (ctx.inputs[ops::kRnnW].value && ctx.inputs[ops::kRnnW].value->on_host()) {
    const float* w = ctx.inputs[ops::kRnnW].value->data<float>();
    TERN_ASSIGN_OR_RETURN(
        k->w_, packed_input(
                   ctx, ops::kRnnW, kWKey, static_cast<size_t>(w_floats_per_dir(p) * p.dirs),
                   [&](float* out) { pack_w(p, w, out); }, &k->own_w_));
    k->w_ptr_ = static_cast<const float*>(k->w_.data.raw());
  }
  if (ctx.inputs[ops::kRnnR].value && ctx.inputs[ops::kRnnR].value->on_host()) {
    const float* r = ctx.inputs[ops::kRnnR].value->data<float>();
    // The key names the kind: GRU packs R in two parts.
    const std::string key = str_cat(kRKey, kind == RnnKind::kGru ? " gru" : "");
    TERN_ASSIGN_OR_RETURN(
        k->r_, packed_input(
                   ctx, ops::kRnnR, key, static_cast<size_t>(r_layout(p).per_dir() * p.dirs),
                   [&](float* out) { pack_r(p, r, out); }, &k->own_r_));
    k->r_ptr_ = static_cast<const float*>(k->r_.data.raw());
  }
  return std::unique_ptr<Kernel>(std::move(k));
}

template <RnnKind K>
Expected<std::unique_ptr<Kernel>> make_recurrent(const OpContext& ctx) {
  return CpuRecurrent::create(ctx, K);
}

}  // namespace

TERN_REGISTRATION void register_cpu_recurrent(KernelRegistry& r) {
  r.add("LSTM", "cpu", DType::kFloat32, make_recurrent<RnnKind::kLstm>);
  r.add("GRU", "cpu", DType::kFloat32, make_recurrent<RnnKind::kGru>);
  r.add("RNN", "cpu", DType::kFloat32, make_recurrent<RnnKind::kRnn>);
}

}  // namespace tern
