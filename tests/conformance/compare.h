// Output comparison with ONNX's rules (onnx/backend/test/runner: assert_similar_outputs): exact
// shape and dtype, strings and integers exact, floats |got - want| <= atol + rtol * |want| with
// NaN matching NaN and an infinity matching the same infinity.
#pragma once

#include <string>

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

}  // namespace tern_conformance
