// Einsum: params, shape inference, path search and the naive reference (accumulates in double).
#include "ops/einsum.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "ops/common/op_utils.h"

namespace tern {
namespace ops {

namespace {

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

double size_of(const EinsumSpec& s, const std::string& labels) {
  double n = 1;
  for (char c : labels) n *= static_cast<double>(s.dim[static_cast<int>(c)]);
  return n;
}

// Letters of a pairwise result: those of a or b still needed by the output or another operand.
std::string result_labels(const std::string& a, const std::string& b,
                          const std::vector<std::string>& others, const std::string& output) {
  std::string r;
  for (const std::string* src : {&a, &b}) {
    for (char c : *src) {
      if (r.find(c) != std::string::npos) continue;
      bool needed = output.find(c) != std::string::npos;
      for (const auto& o : others) needed = needed || o.find(c) != std::string::npos;
      if (needed) r += c;
    }
  }
  return r;
}

std::string union_labels(const std::string& a, const std::string& b) {
  std::string u = a;
  for (char c : b) {
    if (u.find(c) == std::string::npos) u += c;
  }
  return u;
}

struct Live {
  int id;
  std::string labels;
};

// Contracts live[i] and live[j]; returns the step cost.
double contract(const EinsumSpec& s, std::vector<Live>& live, size_t i, size_t j, int new_id) {
  std::vector<std::string> others;
  for (size_t k = 0; k < live.size(); ++k) {
    if (k != i && k != j) others.push_back(live[k].labels);
  }
  const double cost = size_of(s, union_labels(live[i].labels, live[j].labels));
  Live r{new_id, result_labels(live[i].labels, live[j].labels, others, s.output)};
  live.erase(live.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
  live.erase(live.begin() + static_cast<std::ptrdiff_t>(std::min(i, j)));
  live.push_back(r);
  return cost;
}

}  // namespace

Expected<EinsumSpec> parse_einsum(const std::string& equation, const std::vector<Shape>& shapes) {
  EinsumSpec s;
  std::string eq;
  for (char c : equation) {
    if (c != ' ') eq += c;
  }
  if (eq.find("...") != std::string::npos) {
    return unsupported("Einsum: ellipsis ('...') is not supported yet");
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    s.inputs.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (s.inputs.size() != shapes.size()) {
    return invalid_argument("Einsum equation '", equation, "' names ", s.inputs.size(),
                            " operands, got ", shapes.size(), " inputs");
  }
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const std::string& sub = s.inputs[i];
    if (sub.size() != shapes[i].size()) {
      return invalid_argument("Einsum operand ", i, " '", sub, "' has ", sub.size(),
                              " letters but the input has rank ", shapes[i].size());
    }
    for (size_t d = 0; d < sub.size(); ++d) {
      char c = sub[d];
      if (!is_letter(c))
        return invalid_model("Einsum equation '", equation, "': bad character '", c, "'");
      if (sub.find(c) != d) {
        return unsupported("Einsum: repeated subscript '", c,
                           "' in one operand (diagonals) is not "
                           "supported yet");
      }
      int64_t& dim = s.dim[static_cast<int>(c)];
      if (dim != 0 && dim != shapes[i][d]) {
        return invalid_argument("Einsum subscript '", c, "' is ", dim, " in one operand and ",
                                shapes[i][d], " in operand ", i);
      }
      dim = shapes[i][d];
    }
  }
  if (arrow != std::string::npos) {
    s.output = eq.substr(arrow + 2);
    for (size_t d = 0; d < s.output.size(); ++d) {
      char c = s.output[d];
      if (!is_letter(c) || s.output.find(c) != d || lhs.find(c) == std::string::npos) {
        return invalid_model("Einsum equation '", equation, "': output subscript '", c,
                             "' is repeated or not in any operand");
      }
    }
  } else {  // implicit: letters that appear once, alphabetically
    std::string once;
    for (char c = 'A'; c <= 'z'; ++c) {
      if (!is_letter(c)) continue;
      size_t n = static_cast<size_t>(std::count(lhs.begin(), lhs.end(), c));
      if (n == 1) once += c;
    }
    s.output = once;
  }
  return s;
}

std::string EinsumPath::describe() const {
  std::string d;
  for (const auto& st : steps) d += str_cat("(", st.first, ",", st.second, ")");
  return d;
}

EinsumStrategy einsum_strategy(bool enabled, int64_t strategy_flag, size_t operands) {
  if (!enabled) return EinsumStrategy::kLeftToRight;
  if (strategy_flag == 1) return EinsumStrategy::kGreedy;
  if (strategy_flag == 2) return EinsumStrategy::kOptimal;
  return operands <= 4 ? EinsumStrategy::kOptimal : EinsumStrategy::kGreedy;
}

EinsumPath einsum_path(const EinsumSpec& spec, EinsumStrategy strategy) {
  const int n = static_cast<int>(spec.inputs.size());
  std::vector<Live> live;
  for (int i = 0; i < n; ++i) live.push_back({i, spec.inputs[static_cast<size_t>(i)]});
  EinsumPath path;
  int next = n;
  if (strategy == EinsumStrategy::kLeftToRight) {
    while (live.size() > 1) {
      path.steps.emplace_back(live[0].id, live[1].id);
      path.cost += contract(spec, live, 0, 1, next++);
    }
    return path;
  }
  if (strategy == EinsumStrategy::kGreedy) {
    while (live.size() > 1) {
      size_t bi = 0, bj = 1;
      double best = std::numeric_limits<double>::infinity(), best_cost = best;
      for (size_t i = 0; i < live.size(); ++i) {
        for (size_t j = i + 1; j < live.size(); ++j) {
          std::vector<Live> trial = live;
          double c = contract(spec, trial, i, j, next);
          // opt_einsum's greedy score: how much the result grows over its inputs.
          double score = size_of(spec, trial.back().labels) - size_of(spec, live[i].labels) -
                         size_of(spec, live[j].labels);
          if (score < best || (score == best && c < best_cost)) {
            best = score;
            best_cost = c;
            bi = i;
            bj = j;
          }
        }
      }
      path.steps.emplace_back(live[bi].id, live[bj].id);
      path.cost += contract(spec, live, bi, bj, next++);
    }
    return path;
  }
  // Optimal: depth-first over every pair order, pruned by the best cost so far.
  EinsumPath best;
  best.cost = std::numeric_limits<double>::infinity();
  std::vector<std::pair<int, int>> steps;
  std::function<void(std::vector<Live>&, double, int)> search = [&](std::vector<Live>& cur,
                                                                    double cost, int id) {
    if (cost >= best.cost) return;
    if (cur.size() <= 1) {
      best.cost = cost;
      best.steps = steps;
      return;
    }
    for (size_t i = 0; i < cur.size(); ++i) {
      for (size_t j = i + 1; j < cur.size(); ++j) {
        std::vector<Live> trial = cur;
        steps.emplace_back(cur[i].id, cur[j].id);
        double c = contract(spec, trial, i, j, id);
        search(trial, cost + c, id + 1);
        steps.pop_back();
      }
    }
  };
  search(live, 0, n);
  if (n == 1) best.cost = 0;
  return best;
}

void einsum_reference(const EinsumSpec& spec, const std::vector<const float*>& in, float* out) {
  std::string all = spec.output;
  for (const auto& sub : spec.inputs) all = union_labels(all, sub);
  std::vector<int64_t> idx(all.size(), 0);
  int64_t out_count = 1;
  for (char c : spec.output) out_count *= spec.dim[static_cast<int>(c)];
  std::vector<double> acc(static_cast<size_t>(out_count), 0.0);
  for (char c : all) {
    if (spec.dim[static_cast<int>(c)] == 0) return void(std::fill(out, out + out_count, 0.0f));
  }
  auto offset = [&](const std::string& labels) {
    int64_t off = 0;
    for (char c : labels) {
      off = off * spec.dim[static_cast<int>(c)] + idx[all.find(c)];
    }
    return off;
  };
  for (;;) {
    double prod = 1;
    for (size_t i = 0; i < in.size(); ++i) prod *= in[i][offset(spec.inputs[i])];
    acc[static_cast<size_t>(offset(spec.output))] += prod;
    int d = static_cast<int>(all.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < spec.dim[static_cast<int>(all[static_cast<size_t>(d)])]) {
        break;
      }
      idx[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) break;
  }
  for (int64_t i = 0; i < out_count; ++i) out[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
}

}  // namespace ops

namespace {

struct EinsumParams {
  ops::EinsumSpec spec;
};

Expected<ops::EinsumSpec> spec_of(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(std::string eq, ctx.attrs().get_string("equation", ""));
  if (eq.empty()) return invalid_model("attribute 'equation' is required");
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return invalid_model("input ", i, " is missing");
    if (!ops::visit_any_float(ctx.inputs[i].dtype, [](auto) {})) {
      return ops::dtype_error(ctx, i, "float types");
    }
    if (ctx.inputs[i].dtype != ctx.inputs[0].dtype) TERN_RETURN_IF_ERROR(ops::require_same_dtype(ctx, 0, i));
    shapes.push_back(ctx.inputs[i].shape);
  }
  return ops::parse_einsum(eq, shapes);
}

Status infer_einsum(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::EinsumSpec s, spec_of(ctx));
  Shape out;
  for (char c : s.output) out.push_back(s.dim[static_cast<int>(c)]);
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_reference(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::EinsumSpec s, spec_of(ctx));
  return make_kernel("reference", EinsumParams{s},
                     [](const EinsumParams& p, const KernelArgs& a, const ExecContext&) {
                       std::vector<std::vector<float>> copies;  // non-float32 inputs
                       std::vector<const float*> in;
                       const bool f32 = a.outputs[0]->dtype() == DType::kFloat32;
                       for (const Tensor* t : a.inputs) {
                         if (f32) {
                           in.push_back(t->data<float>());
                         } else {
                           copies.push_back(ops::to_float32(*t));
                           in.push_back(copies.back().data());
                         }
                       }
                       if (f32) {
                         ops::einsum_reference(p.spec, in, a.outputs[0]->data<float>());
                         return Status::ok();
                       }
                       std::vector<float> y(static_cast<size_t>(a.outputs[0]->numel()));
                       ops::einsum_reference(p.spec, in, y.data());
                       ops::from_float32(y, *a.outputs[0]);
                       return Status::ok();
                     });
}

}  // namespace

TERN_REGISTRATION void register_op_einsum(OpRegistry& r) {
  r.add({"Einsum", 1, 64, 1, 1, infer_einsum, make_reference, {}, attrs("equation")});
}

}  // namespace tern
