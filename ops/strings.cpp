// String ops: StringConcat (broadcasting), StringNormalizer (stop words, case change),
// StringSplit (Python str.split semantics, maxsplit) and RegexFullMatch (ECMAScript regex, which
// covers the RE2 subset of the ONNX tests: classes, \w \W \b, groups, alternation, bounds).
// Case mapping is ASCII; other bytes of UTF-8 text are kept as they are.
#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

#include "core/exceptions.h"
#include "ops/common/elementwise.h"

namespace tern {
namespace {

Status require_strings(const OpContext& ctx, size_t i) {
  if (ctx.inputs[i].dtype != DType::kString) return ops::dtype_error(ctx, i, "string");
  return Status::ok();
}

// ---- StringConcat -------------------------------------------------------------------------------

Status infer_concat(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_strings(ctx, 0));
  TERN_RETURN_IF_ERROR(require_strings(ctx, 1));
  auto out = ops::broadcast_shapes(ctx.inputs[0].shape, ctx.inputs[1].shape);
  if (!out) return out.status().with_prefix(ctx.where);
  ctx.set_output(0, DType::kString, *out);
  return Status::ok();
}

Status run_concat(const ops::BroadcastRows& rows, const KernelArgs& a, const ExecContext&) {
  const auto* x = a.inputs[0]->data<std::string>();
  const auto* y = a.inputs[1]->data<std::string>();
  auto* z = a.outputs[0]->data<std::string>();
  ops::broadcast_for_each<2>(rows, 1,
                             [&](int64_t o, const int64_t* off) { z[o] = x[off[0]] + y[off[1]]; });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_concat(const OpContext& ctx) {
  return make_kernel(
      "reference",
      ops::plan_broadcast(ctx.outputs[0].shape, {ctx.inputs[0].shape, ctx.inputs[1].shape}),
      run_concat);
}

// ---- StringNormalizer ---------------------------------------------------------------------------

struct NormParams {
  int action = 0;  // 0 none, 1 lower, 2 upper
  bool case_sensitive = false;
  std::set<std::string> stop;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Expected<NormParams> norm_params(const OpContext& ctx) {
  NormParams p;
  TERN_ASSIGN_OR_RETURN(std::string act, ctx.attrs().get_string("case_change_action", "NONE"));
  if (act == "LOWER") {
    p.action = 1;
  } else if (act == "UPPER") {
    p.action = 2;
  } else if (act != "NONE") {
    return invalid_model(ctx.where, ": case_change_action must be LOWER, UPPER or NONE");
  }
  TERN_ASSIGN_OR_RETURN(int64_t cs, ctx.attrs().get_int("is_case_sensitive", 0));
  p.case_sensitive = cs != 0;
  // Case changes are ASCII's (std::toupper in the C locale): English locales only.
  TERN_ASSIGN_OR_RETURN(std::string locale, ctx.attrs().get_string("locale", ""));
  if (!locale.empty() && locale != "C" && locale.rfind("en", 0) != 0) {
    return unsupported(ctx.where, ": locale '", locale, "' (case changes are ASCII only)");
  }
  if (const Attribute* sw = ctx.attrs().find("stopwords")) {
    for (const std::string& w : sw->strings) p.stop.insert(p.case_sensitive ? w : lower(w));
  }
  return p;
}

std::vector<std::string> normalize(const NormParams& p, const Tensor& x) {
  std::vector<std::string> kept;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& s = x.data<std::string>()[i];
    if (p.stop.count(p.case_sensitive ? s : lower(s))) continue;
    kept.push_back(p.action == 1 ? lower(s) : p.action == 2 ? upper(s) : s);
  }
  if (kept.empty()) kept.emplace_back();  // everything filtered: one empty string
  return kept;
}

Status infer_normalizer(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_strings(ctx, 0));
  const Shape& x = ctx.inputs[0].shape;
  if (!(x.size() == 1 || (x.size() == 2 && x[0] == 1))) {
    return invalid_model(ctx.where, ": input must be [C] or [1, C], got ", shape_str(x));
  }
  TERN_ASSIGN_OR_RETURN(NormParams p, norm_params(ctx));
  const int64_t n = static_cast<int64_t>(normalize(p, *ctx.inputs[0].value).size());
  ctx.set_output(0, DType::kString, x.size() == 1 ? Shape{n} : Shape{1, n});
  return Status::ok();
}

Status run_normalizer(const NormParams& p, const KernelArgs& a, const ExecContext&) {
  const auto kept = normalize(p, *a.inputs[0]);
  std::copy(kept.begin(), kept.end(), a.outputs[0]->data<std::string>());
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_normalizer(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(NormParams p, norm_params(ctx));
  return make_kernel("reference", std::move(p), run_normalizer);
}

// ---- StringSplit --------------------------------------------------------------------------------

struct SplitParams {
  bool whitespace = true;
  std::string delim;
  int64_t maxsplit = -1;
};

std::vector<std::string> split_one(const SplitParams& p, const std::string& s) {
  std::vector<std::string> parts;
  int64_t splits = 0;
  if (p.whitespace) {  // runs of whitespace, leading/trailing ignored
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (p.maxsplit >= 0 && splits == p.maxsplit) {
        size_t end = s.size();
        while (end > i && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
        parts.push_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      parts.push_back(s.substr(i, j - i));
      ++splits;
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while (true) {
    const size_t at =
        (p.maxsplit >= 0 && splits == p.maxsplit) ? std::string::npos : s.find(p.delim, start);
    if (at == std::string::npos) {
      parts.push_back(s.substr(start));
      break;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + p.delim.size();
    ++splits;
  }
  return parts;
}

Expected<SplitParams> split_params(const OpContext& ctx) {
  SplitParams p;
  if (const Attribute* d = ctx.attrs().find("delimiter")) {
    p.delim = d->s;
    p.whitespace = p.delim.empty();
  }
  TERN_ASSIGN_OR_RETURN(p.maxsplit, ctx.attrs().get_int("maxsplit", -1));
  return p;
}

Status infer_split(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_strings(ctx, 0));
  TERN_ASSIGN_OR_RETURN(SplitParams p, split_params(ctx));
  const Tensor& x = *ctx.inputs[0].value;
  int64_t most = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    most = std::max<int64_t>(most,
                             static_cast<int64_t>(split_one(p, x.data<std::string>()[i]).size()));
  }
  Shape y = x.shape();
  y.push_back(most);
  ctx.set_output(0, DType::kString, y);
  ctx.set_output(1, DType::kInt64, x.shape());
  return Status::ok();
}

Status run_split(const SplitParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const int64_t most = a.outputs[0]->shape().back();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto parts = split_one(p, x.data<std::string>()[i]);
    for (size_t k = 0; k < parts.size(); ++k) {
      a.outputs[0]->data<std::string>()[i * most + static_cast<int64_t>(k)] = parts[k];
    }
    if (a.outputs[1]) a.outputs[1]->data<int64_t>()[i] = static_cast<int64_t>(parts.size());
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_split(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(SplitParams p, split_params(ctx));
  return make_kernel("reference", std::move(p), run_split);
}

// ---- RegexFullMatch -----------------------------------------------------------------------------

Status infer_regex(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_strings(ctx, 0));
  ctx.set_output(0, DType::kBool, ctx.inputs[0].shape);
  return Status::ok();
}

#if TERN_HAVE_EXCEPTIONS
struct RegexParams {
  std::shared_ptr<const std::regex> re;
};

Status run_regex(const RegexParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  for (int64_t i = 0; i < x.numel(); ++i) {
    a.outputs[0]->data<uint8_t>()[i] = std::regex_match(x.data<std::string>()[i], *p.re);
  }
  return Status::ok();
}
#endif

Expected<std::unique_ptr<Kernel>> make_regex(const OpContext& ctx) {
#if TERN_HAVE_EXCEPTIONS
  TERN_ASSIGN_OR_RETURN(std::string pattern, ctx.attrs().get_string("pattern", ""));
  try {
    return make_kernel("reference", RegexParams{std::make_shared<const std::regex>(pattern)},
                       run_regex);
  } catch (const std::regex_error& e) {
    return unsupported(ctx.where, ": pattern '", pattern, "' is not a supported regex (", e.what(),
                       ")");
  }
#else
  // std::regex reports a bad pattern, or a match past its limits, only by throwing.
  return unsupported(ctx.where, ": RegexFullMatch is left out of builds without C++ exceptions ",
                     "(TERN_MINIMAL): std::regex reports bad patterns by throwing");
#endif
}

}  // namespace

TERN_REGISTRATION void register_op_strings(OpRegistry& r) {
  // Every op here reads strings: a build that left the type out (the minimal build's default,
  // core/dtype.h) refuses their models at load by the values' type, so they are left out too.
  if (!dtype_built(DType::kString)) return;
  r.add({"StringConcat", 2, 2, 1, 1, infer_concat, make_concat, {}, attrs({})});
  r.add({"StringNormalizer",
         1,
         1,
         1,
         1,
         infer_normalizer,
         make_normalizer,
         {0},
         attrs("case_change_action, is_case_sensitive, stopwords, locale")});
  r.add({"StringSplit", 1, 1, 2, 2, infer_split, make_split, {0}, attrs("delimiter, maxsplit")});
  r.add({"RegexFullMatch", 1, 1, 1, 1, infer_regex, make_regex, {}, attrs("pattern")});
}

}  // namespace tern
