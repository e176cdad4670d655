#include "compare.h"

#include <cmath>
#include <sstream>

#include "core/half.h"

namespace tern_conformance {

using tern::DType;
using tern::Tensor;

double element_as_double(const Tensor& t, int64_t i) {
  return t.float_at(i);
}

namespace {

bool same_header(const Tensor& got, const Tensor& want, std::string* why) {
  if (got.dtype() != want.dtype()) {
    *why = tern::str_cat("dtype ", tern::dtype_name(got.dtype()), ", expected ",
                         tern::dtype_name(want.dtype()));
    return false;
  }
  if (got.shape() != want.shape()) {
    *why = tern::str_cat("shape ", tern::shape_str(got.shape()), ", expected ",
                         tern::shape_str(want.shape()));
    return false;
  }
  return true;
}

bool exact_integers(DType t) {
  return !tern::dtype_is_float(t) && !tern::dtype_is_low_float(t) && t != DType::kString;
}

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

}  // namespace

bool outputs_match(const Tensor& got, const Tensor& want, const Tolerance& tol,
                   std::string* why) {
  if (!same_header(got, want, why)) return false;
  const int64_t n = want.numel();
  if (want.dtype() == DType::kString) {
    for (int64_t i = 0; i < n; ++i) {
      if (got.data<std::string>()[i] != want.data<std::string>()[i]) {
        *why = tern::str_cat("element ", i, " is \"", got.data<std::string>()[i], "\", expected \"",
                             want.data<std::string>()[i], "\"");
        return false;
      }
    }
    return true;
  }
  if (exact_integers(want.dtype())) {
    const size_t es = tern::dtype_size(want.dtype());
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(static_cast<const uint8_t*>(got.raw()) + i * es,
                      static_cast<const uint8_t*>(want.raw()) + i * es, es) != 0) {
        *why = tern::str_cat("element ", i, " is ", fmt(element_as_double(got, i)), ", expected ",
                             fmt(element_as_double(want, i)), " (integers compare exactly)");
        return false;
      }
    }
    return true;
  }
  int64_t worst = -1, bad = 0;
  double worst_excess = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = element_as_double(got, i), w = element_as_double(want, i);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) && std::isnan(g)) continue;
    } else if (std::isinf(w) || std::isinf(g)) {
      if (g == w) continue;
    } else {
      const double bound = tol.atol + tol.rtol * std::fabs(w);
      const double d = std::fabs(g - w);
      if (d <= bound) continue;
      if (worst < 0 || std::isnan(worst_excess) || d - bound > worst_excess) {
        worst = i, worst_excess = d - bound;
      }
      ++bad;
      continue;
    }
    if (worst < 0) worst = i, worst_excess = std::nan("");
    ++bad;
  }
  if (bad == 0) return true;
  const double g = element_as_double(got, worst), w = element_as_double(want, worst);
  *why = tern::str_cat(bad, " of ", n, " elements differ; worst: element ", worst, " is ", fmt(g),
                       ", expected ", fmt(w), " (|diff| ", fmt(std::fabs(g - w)), ", bound ",
                       fmt(tol.atol + tol.rtol * std::fabs(w)), ")");
  return false;
}

bool bernoulli_matches(const Tensor& got, const Tensor& want, std::string* why) {
  if (!same_header(got, want, why)) return false;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double v = element_as_double(got, i);
    if (v != 0 && v != 1) {
      *why = tern::str_cat("element ", i, " is ", fmt(v), "; Bernoulli draws 0 or 1");
      return false;
    }
  }
  return true;
}

bool dropout_matches(const Tensor& got, const Tensor& want, const Tensor& x, std::string* why) {
  if (!same_header(got, want, why)) return false;
  double scale = 0;
  for (int64_t i = 0; i < want.numel() && scale == 0; ++i) {
    const double xi = element_as_double(x, i), wi = element_as_double(want, i);
    if (wi != 0 && xi != 0) scale = wi / xi;
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = element_as_double(got, i), xi = element_as_double(x, i);
    if (g == 0) continue;
    if (scale != 0 && std::fabs(g - xi * scale) <= 1e-6 + 1e-3 * std::fabs(xi * scale)) continue;
    *why = tern::str_cat("element ", i, " is ", fmt(g), "; dropout keeps 0 or x * ", fmt(scale),
                         " = ", fmt(xi * scale));
    return false;
  }
  return true;
}

bool dropout_mask_matches(const Tensor& mask, const Tensor& want_mask, const Tensor& y,
                          std::string* why) {
  if (!same_header(mask, want_mask, why)) return false;
  for (int64_t i = 0; i < mask.numel(); ++i) {
    const bool kept = mask.data<uint8_t>()[i] != 0;
    if (!kept && element_as_double(y, i) != 0) {
      *why = tern::str_cat("mask element ", i, " drops a value the output kept");
      return false;
    }
  }
  return true;
}

}  // namespace tern_conformance
