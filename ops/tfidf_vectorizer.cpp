// TfIdfVectorizer (opset 9): counts the pool's n-grams in each row of a [C] or [B, C] input of
// int32, int64 or string tokens (skip-grams: the items of an n-gram `skip + 1` apart, for every
// skip up to max_skip_count; unigrams once) and writes per output column the count (TF), the
// weight or 1 where the count is positive (IDF), or weight * count (TFIDF), as float32.
// The pool holds n-grams grouped by size (ngram_counts: where each size starts) and numbered
// 1, 2, ... across all sizes in order; n-gram k's column is ngram_indexes[k - 1]. Only sizes in
// [min_gram_length, max_gram_length] count. A repeated n-gram keeps its last number, as ONNX's
// reference does.
#include <algorithm>
#include <map>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

enum class Weighting { kTf, kIdf, kTfIdf };

struct TfIdfParams {
  Weighting mode = Weighting::kTf;
  int64_t min_n = 1, max_n = 1, max_skip = 0, output_size = 0;
  std::vector<float> weights;  // per output column, or empty
  bool strings = false;
  // n-gram -> output column
  std::map<std::vector<int64_t>, int64_t> int_grams;
  std::map<std::vector<std::string>, int64_t> string_grams;
};

template <class Token>
Status add_grams(const std::vector<Token>& pool, const std::vector<int64_t>& counts,
                 const std::vector<int64_t>& indexes, TfIdfParams& p,
                 std::map<std::vector<Token>, int64_t>& grams) {
  const auto total = static_cast<int64_t>(pool.size());
  int64_t id = 0;  // 0-based: n-gram id + 1 is ONNX's number
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto n = static_cast<int64_t>(i) + 1;
    const int64_t begin = counts[i], end = i + 1 < counts.size() ? counts[i + 1] : total;
    if (begin < 0 || begin > end || end > total) {
      return invalid_model("ngram_counts ", shape_str(counts), " do not split a pool of ", total,
                           " items");
    }
    const int64_t count = (end - begin) / n;
    for (int64_t g = 0; g < count; ++g, ++id) {
      if (n < p.min_n || n > p.max_n) continue;
      if (id >= static_cast<int64_t>(indexes.size())) {
        return invalid_model("ngram_indexes has ", indexes.size(),
                             " entries, the pool more n-grams");
      }
      const auto first = pool.begin() + begin + g * n;
      grams[std::vector<Token>(first, first + n)] = indexes[static_cast<size_t>(id)];
    }
  }
  return Status::ok();
}

Expected<TfIdfParams> parse_tfidf(const OpContext& ctx) {
  TfIdfParams p;
  const Attributes& at = ctx.attrs();
  TERN_ASSIGN_OR_RETURN(std::string mode, at.get_string("mode", ""));
  if (mode == "TF") {
    p.mode = Weighting::kTf;
  } else if (mode == "IDF") {
    p.mode = Weighting::kIdf;
  } else if (mode == "TFIDF") {
    p.mode = Weighting::kTfIdf;
  } else {
    return invalid_model("mode '", mode, "' is not TF, IDF or TFIDF");
  }
  TERN_ASSIGN_OR_RETURN(p.min_n, at.get_int("min_gram_length", 0));
  TERN_ASSIGN_OR_RETURN(p.max_n, at.get_int("max_gram_length", 0));
  TERN_ASSIGN_OR_RETURN(p.max_skip, at.get_int("max_skip_count", 0));
  if (p.min_n < 1 || p.max_n < p.min_n || p.max_skip < 0) {
    return invalid_model("min_gram_length ", p.min_n, ", max_gram_length ", p.max_n,
                         " and max_skip_count ", p.max_skip,
                         " must satisfy 1 <= min <= max, skip >= 0");
  }
  TERN_ASSIGN_OR_RETURN(auto counts, at.get_ints("ngram_counts"));
  TERN_ASSIGN_OR_RETURN(auto indexes, at.get_ints("ngram_indexes"));
  TERN_ASSIGN_OR_RETURN(p.weights, at.get_floats("weights"));
  if (indexes.empty() || *std::min_element(indexes.begin(), indexes.end()) < 0 ||
      *std::max_element(indexes.begin(), indexes.end()) >= (int64_t{1} << 40)) {
    return invalid_model("ngram_indexes must be non-empty, not negative and below 2^40");
  }
  p.output_size = *std::max_element(indexes.begin(), indexes.end()) + 1;
  if (!p.weights.empty() && static_cast<int64_t>(p.weights.size()) < p.output_size) {
    return invalid_model("weights has ", p.weights.size(), " entries for ", p.output_size,
                         " output columns");
  }
  const DType d = ctx.inputs[0].dtype;
  if (d != DType::kString && d != DType::kInt32 && d != DType::kInt64) {
    return ops::dtype_error(ctx, 0, "string, int32 or int64");
  }
  p.strings = d == DType::kString;
  if (p.strings) {
    TERN_ASSIGN_OR_RETURN(auto pool, at.get_strings("pool_strings"));
    if (pool.empty()) return invalid_argument("string input needs the pool_strings attribute");
    TERN_RETURN_IF_ERROR(add_grams(pool, counts, indexes, p, p.string_grams));
  } else {
    TERN_ASSIGN_OR_RETURN(auto pool, at.get_ints("pool_int64s"));
    if (pool.empty()) return invalid_argument("integer input needs the pool_int64s attribute");
    TERN_RETURN_IF_ERROR(add_grams(pool, counts, indexes, p, p.int_grams));
  }
  const Shape& x = ctx.inputs[0].shape;
  if (x.size() > 2 || (x.size() == 2 && x[0] < 1)) {
    return invalid_argument("input '", ctx.input_names[0],
                            "' must be [C] or [B, C] with B > 0, got ", shape_str(x));
  }
  return p;
}

Status infer_tfidf(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(TfIdfParams p, parse_tfidf(ctx));
  const Shape& x = ctx.inputs[0].shape;
  ctx.set_output(0, DType::kFloat32,
                 x.size() == 2 ? Shape{x[0], p.output_size} : Shape{p.output_size});
  return Status::ok();
}

// Adds each row's n-gram counts into counts[row * output_size + column].
template <class Token>
void count_rows(const TfIdfParams& p, const std::map<std::vector<Token>, int64_t>& grams,
                const std::vector<Token>& tokens, int64_t rows, int64_t cols,
                std::vector<int64_t>& counts) {
  std::vector<Token> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const Token* row = tokens.data() + r * cols;
    // A skip of cols - 1 or more leaves no room for a second token.
    const int64_t max_skip = std::min<int64_t>(p.max_skip, std::max<int64_t>(cols - 1, 0));
    for (int64_t skip = 0; skip <= max_skip; ++skip) {
      const int64_t step = skip + 1;
      const int64_t lo = skip > 0 ? std::max<int64_t>(p.min_n, 2) : p.min_n;  // unigrams once
      for (int64_t start = 0; start < cols; ++start) {
        for (int64_t n = lo; n <= p.max_n && start + (n - 1) * step < cols; ++n) {
          gram.clear();
          for (int64_t k = 0; k < n; ++k) gram.push_back(row[start + k * step]);
          const auto hit = grams.find(gram);
          if (hit != grams.end()) ++counts[static_cast<size_t>(r * p.output_size + hit->second)];
        }
      }
    }
  }
}

Status run_tfidf(const TfIdfParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const int64_t rows = x.rank() == 2 ? x.shape()[0] : 1;
  const int64_t cols = rows > 0 ? x.numel() / rows : 0;
  std::vector<int64_t> counts(static_cast<size_t>(rows * p.output_size), 0);
  if (p.strings) {
    const auto* s = x.data<std::string>();
    count_rows(p, p.string_grams, std::vector<std::string>(s, s + x.numel()), rows, cols, counts);
  } else {
    std::vector<int64_t> tokens(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) tokens[static_cast<size_t>(i)] = x.int_at(i);
    count_rows(p, p.int_grams, tokens, rows, cols, counts);
  }
  float* y = a.outputs[0]->data<float>();
  for (size_t i = 0; i < counts.size(); ++i) {
    const float w = p.weights.empty() ? 1.0f : p.weights[i % static_cast<size_t>(p.output_size)];
    const auto c = static_cast<float>(counts[i]);
    switch (p.mode) {
      case Weighting::kTf:
        y[i] = c;
        break;
      case Weighting::kIdf:
        y[i] = counts[i] > 0 ? w : 0.0f;
        break;
      case Weighting::kTfIdf:
        y[i] = w * c;
        break;
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_tfidf(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(TfIdfParams p, parse_tfidf(ctx));
  return make_kernel("reference", std::move(p), run_tfidf);
}

}  // namespace

TERN_REGISTRATION void register_op_tfidf_vectorizer(OpRegistry& r) {
  r.add({"TfIdfVectorizer",
         1,
         1,
         1,
         1,
         infer_tfidf,
         make_tfidf,
         {},
         attrs("max_gram_length, max_skip_count, min_gram_length, mode, ngram_counts, "
               "ngram_indexes, pool_int64s, pool_strings, weights")});
}

}  // namespace tern
