// LSTM, GRU and RNN (ONNX opsets 1 to 22): the parameters every kernel reads, parsed once, and the
// shapes and strides of their operands in both layouts.
//
// Inputs: X, W, R, B, sequence_lens, initial_h (and for LSTM initial_c, P). Gate order in W, R, B:
// LSTM i o f c, GRU z r h, RNN one gate. Layout 0: X [seq, batch, in], Y [seq, dirs, batch, H],
// Y_h [dirs, batch, H]; layout 1: X [batch, seq, in], Y [batch, seq, dirs, H], Y_h [batch, dirs,
// H]. A batch entry's steps at or past its sequence length leave its state as it was and write
// zeros to Y; a reverse direction runs from the entry's last step to its first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kernel.h"

namespace tern::ops {

enum class RnnKind { kLstm, kGru, kRnn };

// One activation of the ONNX list and its alpha/beta.
struct RnnActivation {
  enum class Fn {
    kSigmoid,
    kTanh,
    kRelu,
    kAffine,
    kLeakyRelu,
    kThresholdedRelu,
    kScaledTanh,
    kHardSigmoid,
    kElu,
    kSoftsign,
    kSoftplus
  } fn = Fn::kSigmoid;
  float alpha = 0, beta = 0;
};

double rnn_activate(const RnnActivation& a, double x);

struct RnnParams {
  RnnKind kind = RnnKind::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool reverse_only = false;  // direction "reverse" (dirs 1)
  int64_t layout = 0;
  float clip = 0;             // 0: none; else gate pre-activations are clamped to [-clip, clip]
  bool input_forget = false;  // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU
  // Per direction: f, g (and h for LSTM), as many as the kind uses.
  std::vector<std::vector<RnnActivation>> acts;

  int64_t gates() const { return kind == RnnKind::kLstm ? 4 : kind == RnnKind::kGru ? 3 : 1; }
  // Whether direction d runs from the last step to the first.
  bool reversed(int64_t d) const { return reverse_only || d == 1; }
  // Element offsets (in floats) of row (t, b) of X and of Y for direction d, and of the state
  // (initial_h, Y_h, ...) of direction d, batch b.
  int64_t x_row(int64_t t, int64_t b) const {
    return (layout == 0 ? t * batch + b : b * seq + t) * input;
  }
  int64_t y_row(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden;
  }
  int64_t state_row(int64_t d, int64_t b) const {
    return (layout == 0 ? d * batch + b : b * dirs + d) * hidden;
  }
};

// Input slots.
constexpr size_t kRnnX = 0, kRnnW = 1, kRnnR = 2, kRnnB = 3, kRnnSeqLens = 4, kRnnInitH = 5,
                 kRnnInitC = 6, kRnnP = 7;

Expected<RnnParams> parse_rnn(const OpContext& ctx, RnnKind kind);

// Steps batch entry b runs (its sequence length; seq without sequence_lens), checked.
Expected<int64_t> rnn_steps(const RnnParams& p, const Tensor* seq_lens, int64_t b);

}  // namespace tern::ops
