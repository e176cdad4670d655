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

bool outputs_match(const Tensor& got, const Tensor& want, const Tolerance& tol, std::string* why) {
  // Sequences element by element; optionals by what they hold.
  if (const tern::SequenceData* w = want.as_sequence()) {
    const tern::SequenceData* g = got.as_sequence();
    if (!g) {
      *why = tern::str_cat("got a ", tern::dtype_name(got.dtype()), ", expected a sequence");
      return false;
    }
    if (g->items.size() != w->items.size()) {
      *why = tern::str_cat("a sequence of ", g->items.size(), ", expected ", w->items.size());
      return false;
    }
    for (size_t i = 0; i < w->items.size(); ++i) {
      if (!outputs_match(g->items[i], w->items[i], tol, why)) {
        *why = tern::str_cat("sequence element ", i, ": ", *why);
        return false;
      }
    }
    return true;
  }
  if (const tern::OptionalData* w = want.as_optional()) {
    const tern::OptionalData* g = got.as_optional();
    if (!g || (g->value == nullptr) != (w->value == nullptr)) {
      *why = tern::str_cat("got ", g ? (g->value ? "a full" : "an empty") : "no",
                           " optional, expected ", w->value ? "a full one" : "an empty one");
      return false;
    }
    return !w->value || outputs_match(*g->value, *w->value, tol, why);
  }
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

namespace {

// 1 / (1 - ratio), from the expected output's kept elements; 0 when it kept none.
double dropout_scale(const Tensor& want, const Tensor& x) {
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double xi = element_as_double(x, i), wi = element_as_double(want, i);
    if (wi != 0 && xi != 0) return wi / xi;
  }
  return 0;
}

}  // namespace

bool dropout_matches(const Tensor& got, const Tensor& want, const Tensor& x, std::string* why) {
  if (!same_header(got, want, why)) return false;
  const double scale = dropout_scale(want, x);
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

bool count_plausible(const std::vector<double>& p, int64_t k, std::string* why) {
  // The distribution of the count over the trials that can go either way, by dynamic
  // programming (O(n^2): these tests draw a few thousand trials at most).
  std::vector<double> dist{1.0};
  int64_t certain = 0;
  double mean = 0;
  for (double pi : p) {
    if (pi >= 1) ++certain;
    if (pi <= 0 || pi >= 1) continue;
    mean += pi;
    dist.push_back(0);
    for (size_t j = dist.size() - 1; j > 0; --j) dist[j] = dist[j] * (1 - pi) + dist[j - 1] * pi;
    dist[0] *= 1 - pi;
  }
  mean += static_cast<double>(certain);
  const int64_t j = k - certain;  // successes among the uncertain trials
  double tail = 0;
  if (j < 0 || j >= static_cast<int64_t>(dist.size())) {
    tail = 0;
  } else if (static_cast<double>(k) <= mean) {
    for (int64_t i = 0; i <= j; ++i) tail += dist[static_cast<size_t>(i)];
  } else {
    for (size_t i = static_cast<size_t>(j); i < dist.size(); ++i) tail += dist[i];
  }
  if (tail >= kImplausible) return true;
  *why = tern::str_cat(k, " successes in ", p.size(), " trials, expected ", fmt(mean),
                       "; a count this far from it has probability ", fmt(tail), " (< ",
                       fmt(kImplausible), ")");
  return false;
}

bool bernoulli_statistics_match(const std::vector<Tensor>& draws, const Tensor& probs,
                                std::string* why, bool complement) {
  std::vector<double> p;
  int64_t ones = 0;
  for (const Tensor& d : draws) {
    if (d.numel() != probs.numel()) {
      *why = tern::str_cat(d.numel(), " draws for ", probs.numel(), " probabilities");
      return false;
    }
    for (int64_t i = 0; i < d.numel(); ++i) {
      const double pi = complement ? 1 - element_as_double(probs, i) : element_as_double(probs, i);
      const bool one = element_as_double(d, i) != 0;
      if ((pi <= 0 && one) || (pi >= 1 && !one)) {
        *why = tern::str_cat("element ", i, " is ", one ? 1 : 0, " where its probability is ",
                             fmt(pi));
        return false;
      }
      p.push_back(pi);
      ones += one;
    }
  }
  if (count_plausible(p, ones, why)) return true;
  *why = tern::str_cat("ones: ", *why, " (", draws.size(), " independent draw",
                       draws.size() == 1 ? "" : "s", ")");
  return false;
}

bool dropout_statistics_match(const std::vector<Tensor>& draws, const Tensor& want, const Tensor& x,
                              std::string* why) {
  const double scale = dropout_scale(want, x);
  // A reference that kept nothing says nothing of the ratio.
  if (scale == 0) return true;
  const double keep = 1 / scale;
  std::vector<double> p;
  int64_t kept = 0;
  for (const Tensor& d : draws) {
    for (int64_t i = 0; i < d.numel() && i < x.numel(); ++i) {
      if (element_as_double(x, i) == 0) continue;  // kept or not, it is 0
      p.push_back(keep);
      kept += element_as_double(d, i) != 0;
    }
  }
  if (count_plausible(p, kept, why)) return true;
  *why = tern::str_cat("kept elements: ", *why, " (keep probability ", fmt(keep), ", ",
                       draws.size(), " independent draw", draws.size() == 1 ? "" : "s", ")");
  return false;
}

}  // namespace tern_conformance
