// Output comparison with ONNX's rules (onnx/backend/test/runner: assert_similar_outputs): exact
// shape and dtype, strings and integers exact, floats |got - want| <= atol + rtol * |want| with
// NaN matching NaN and an infinity matching the same infinity.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace tern_conformance {

struct Tolerance {
  double rtol = 1e-3, atol = 1e-7;
};

// Element i of any numeric tensor as a double (the 8/4/2-bit types decoded).
double element_as_double(const tern::Tensor& t, int64_t i);

// True when `got` matches `want`; otherwise `why` names the worst element.
bool outputs_match(const tern::Tensor& got, const tern::Tensor& want, const Tolerance& tol,
                   std::string* why);

// For outputs drawn from a random generator (Bernoulli, training-mode Dropout): shape and dtype
// exact and every value in the allowed set; see check_random_* in compare.cpp.
bool bernoulli_matches(const tern::Tensor& got, const tern::Tensor& want, std::string* why);
// Dropout output: each element 0 or x * scale, where scale is 1 / (1 - ratio), taken from the
// expected output's non-zero elements. `mask` (may be null) must agree with which elements kept.
bool dropout_matches(const tern::Tensor& got, const tern::Tensor& want, const tern::Tensor& x,
                     std::string* why);
bool dropout_mask_matches(const tern::Tensor& mask, const tern::Tensor& want_mask,
                          const tern::Tensor& y, std::string* why);

// The statistics of random outputs, beyond their value sets (which a kernel returning zeros
// would pass). `draws` are outputs of runs that drew independently: several runs of an unseeded
// op, one of a seeded op (its runs repeat). A trial of probability 0 or 1 must have that
// outcome; the count of successes must not be further from its mean than a draw with these
// probabilities gets with probability kImplausible (exact Poisson-binomial tails): so all zeros,
// or all ones, fail whenever the probabilities make them that unlikely.
constexpr double kImplausible = 1e-5;
bool count_plausible(const std::vector<double>& p, int64_t k, std::string* why);
// Bernoulli: element i is 1 with probability probs[i] (1 - probs[i] when `complement`).
bool bernoulli_statistics_match(const std::vector<tern::Tensor>& draws, const tern::Tensor& probs,
                                std::string* why, bool complement = false);
// Training-mode Dropout: an element with x != 0 is kept with probability 1 / scale (scale read
// from the expected output, as in dropout_matches).
bool dropout_statistics_match(const std::vector<tern::Tensor>& draws, const tern::Tensor& want,
                              const tern::Tensor& x, std::string* why);

}  // namespace tern_conformance
