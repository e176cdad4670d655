// `tern inspect MODEL [--json] [--dot FILE]`: what a model is, without running it for real:
// inputs and outputs, op histogram, parameters by dtype, approximate FLOPs, opset, producer; one
// JSON object with --json; a Graphviz graph of the nodes with --dot. Read through the C API's
// graph introspection (tern_model_node_*, tern_model_value_info); the shapes of intermediate
// values come from the plan of a session with graph.optimize off (tern_session_value_shape) after
// one run on zeros, dynamic input dims 1 unless --shape gives them.
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "c_api.h"
#include "tools/tern/cli_util.h"
#include "tools/tern/commands.h"

namespace tern_cli {

namespace {

struct ValueShape {
  bool known = false;  // every dim known
  tern_dtype dtype = TERN_FLOAT32;
  std::vector<int64_t> dims;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

struct NodeView {
  std::string name, op, domain;
  std::vector<std::string> inputs, outputs;
  std::string label() const {
    return "node '" + name + "' (" + (domain.empty() ? "" : domain + ".") + op + ")";
  }
};

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string json_dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// FLOPs of one node (2 per multiply-add), or -1 when a shape it needs is unknown, 0 for op types
// not counted. *why says what was missing or wrong.
double node_flops(const NodeView& n, const std::unordered_map<std::string, ValueShape>& shapes,
                  std::string* why) {
  auto get = [&](size_t idx, bool input) -> const ValueShape* {
    const auto& list = input ? n.inputs : n.outputs;
    if (idx >= list.size() || list[idx].empty()) return nullptr;
    auto it = shapes.find(list[idx]);
    return it != shapes.end() && it->second.known ? &it->second : nullptr;
  };
  const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
  const bool ms = n.domain == "com.microsoft";
  const std::string& op = n.op;
  if (onnx && (op == "Conv" || op == "ConvInteger" || op == "ConvTranspose")) {
    const bool transpose = op == "ConvTranspose";
    const ValueShape* w = get(1, true);
    const ValueShape* y = transpose ? get(0, true) : get(0, false);  // ConvTranspose: X
    if (!w || !y) return -1;
    if (w->dims.size() < 3 || w->dims[0] <= 0) {
      *why = "weight '" + n.inputs[1] + "' has shape " + json_dims(w->dims);
      return -1;
    }
    // Each output (ConvTranspose: input) element takes C/group * prod(kernel) multiply-adds.
    return 2.0 * static_cast<double>(y->numel()) * static_cast<double>(w->numel() / w->dims[0]);
  }
  if (onnx && (op == "MatMul" || op == "MatMulInteger" || op == "Gemm")) {
    const ValueShape* a = get(0, true);
    const ValueShape* y = get(0, false);
    if (!a || !y || a->dims.empty() || y->dims.empty()) return -1;
    // K: A's last dim (MatMul), or A's size over M (Gemm, either transposition).
    const double k = op == "Gemm" && y->dims[0] > 0
                         ? static_cast<double>(a->numel()) / static_cast<double>(y->dims[0])
                         : static_cast<double>(a->dims.back());
    return 2.0 * static_cast<double>(y->numel()) * k;
  }
  if ((onnx && op == "Attention") || (ms && op == "MultiHeadAttention")) {
    // Q K^T and P V: 2 * 2 * (every query element) * kv length.
    const ValueShape* q = get(0, true);
    const ValueShape* k = get(1, true);
    if (!q || !k || q->dims.size() < 3 || k->dims.size() != q->dims.size()) return -1;
    const int64_t kv = q->dims.size() == 4 ? k->dims[2] : k->dims[1];
    return 4.0 * static_cast<double>(q->numel()) * static_cast<double>(kv);
  }
  if (ms && op == "Attention") {
    // com.microsoft Attention: X [B, S, hidden] projected by W [hidden, 3 hidden], then as above.
    const ValueShape* x = get(0, true);
    const ValueShape* w = get(1, true);
    if (!x || !w || x->dims.size() != 3 || w->dims.size() != 2) return -1;
    return 2.0 * static_cast<double>(x->numel()) * static_cast<double>(w->dims[1]) +
           4.0 * static_cast<double>(x->numel()) * static_cast<double>(x->dims[1]);
  }
  return 0;
}

std::string human(double v) {
  const char* units[] = {"", " K", " M", " G", " T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

}  // namespace

int cmd_inspect(const std::vector<std::string>& args) {
  RunSetup setup;  // --shape, --input (for the run that gives intermediate shapes)
  bool json = false;
  std::string dot_path;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const int handled = parse_setup_option("inspect", args, i, &setup);
    if (handled < 0) return 2;
    if (handled) continue;
    if (a == "--json") {
      json = true;
    } else if (a == "--dot") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tern inspect: --dot needs a file\n");
        return 2;
      }
      dot_path = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tern inspect: unknown option '%s'\n", a.c_str());
      return 2;
    } else if (setup.model_path.empty()) {
      setup.model_path = a;
    } else {
      std::fprintf(stderr, "tern inspect: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (setup.model_path.empty()) {
    std::fprintf(stderr,
                 "usage: tern inspect MODEL [--json] [--dot FILE] [--shape NAME=1x3x8x8]\n");
    return 2;
  }
  const std::string& path = setup.model_path;
  ModelPtr model;
  tern_status s = tern_model_load_file(path.c_str(), &model.p);
  if (s != TERN_OK) {
    std::fprintf(stderr, "tern inspect: %s: %s: %s\n", path.c_str(), tern_status_name(s),
                 tern_last_error());
    return 2;
  }
  const tern_model* m = model.p;

  // Values: declared shapes and constants.
  std::unordered_map<std::string, ValueShape> shapes;
  struct Param {
    tern_dtype dtype;
    int64_t numel;
  };
  std::map<std::string, Param> constants;
  for (size_t i = 0; i < tern_model_value_count(m); ++i) {
    const char* name = nullptr;
    tern_dtype dt{};
    int has_shape = 0, is_const = 0;
    size_t rank = 0;
    const int64_t* dims = nullptr;
    if ((s = tern_model_value_info(m, i, &name, &dt, &has_shape, &rank, &dims, &is_const)) !=
        TERN_OK) {
      return fail("reading the model's values", s);
    }
    ValueShape v;
    v.dtype = dt;
    v.dims.assign(dims, dims + rank);
    v.known = has_shape != 0;
    for (int64_t d : v.dims) v.known = v.known && d >= 0;
    shapes[name] = v;
    if (is_const) constants[name] = Param{dt, v.numel()};
  }
  // Intermediate shapes from one run of a session (zeros in; dynamic dims 1 or --shape's).
  std::string shape_note = "shapes from one run on zero inputs";
  {
    setup.zeros = true;
    // The graph as imported: fusions would take away the values whose shapes are wanted.
    setup.session_flags.emplace_back("graph.optimize", "false");
    Prepared prep;
    bool ok = false;
    if (prepare("inspect", setup, &prep) == 0) {
      ValueList outputs;
      outputs.reset(prep.out_names.size());
      s = tern_session_run_values(prep.session.get(), prep.run_options.get(), prep.in_names.data(),
                                  prep.values.v.data(), prep.values.v.size(), prep.out_names.data(),
                                  prep.out_names.size(), outputs.v.data());
      ok = s == TERN_OK;
      if (!ok) {
        shape_note =
            std::string("declared shapes only (the run failed: ") + tern_last_error() + ")";
      }
    } else {
      shape_note = "declared shapes only (no session)";
    }
    if (ok) {
      for (auto& [name, v] : shapes) {
        if (v.known) continue;
        tern_dtype dt{};
        size_t rank = 0;
        const int64_t* dims = nullptr;
        if (tern_session_value_shape(prep.session.get(), name.c_str(), &dt, &rank, &dims) ==
            TERN_OK) {
          v.dtype = dt;
          v.dims.assign(dims, dims + rank);
          v.known = true;
        }
      }
    }
  }

  // Nodes, histogram, FLOPs.
  std::vector<NodeView> nodes(tern_model_node_count(m));
  std::map<std::string, int> histogram;
  std::map<std::string, double> flops_by_op;
  std::map<std::string, int> uncounted;  // op -> nodes whose shapes were unknown
  std::vector<std::string> warnings;
  std::map<std::string, int> domains;
  double flops = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeView& n = nodes[i];
    const char *name = nullptr, *op = nullptr, *domain = nullptr;
    size_t n_in = 0, n_out = 0;
    if ((s = tern_model_node_info(m, i, &name, &op, &domain, &n_in, &n_out)) != TERN_OK) {
      return fail("reading the model's nodes", s);
    }
    n.name = *name ? name : "#" + std::to_string(i);
    n.op = op;
    n.domain = domain;
    for (size_t j = 0; j < n_in; ++j) n.inputs.push_back(tern_model_node_input(m, i, j));
    for (size_t j = 0; j < n_out; ++j) n.outputs.push_back(tern_model_node_output(m, i, j));
    const std::string key = n.domain.empty() ? n.op : n.domain + "." + n.op;
    ++histogram[key];
    ++domains[n.domain.empty() ? "ai.onnx" : n.domain];
    std::string why;
    const double f = node_flops(n, shapes, &why);
    if (f < 0) {
      ++uncounted[key];
      if (!why.empty()) warnings.push_back(path + ": " + n.label() + ": " + why);
    } else if (f > 0) {
      flops += f;
      flops_by_op[key] += f;
    }
  }
  std::map<tern_dtype, std::pair<int64_t, int64_t>> params;  // dtype -> count, bytes
  int64_t param_count = 0, param_bytes = 0;
  for (const auto& [name, p] : constants) {
    const int64_t bytes = p.numel * static_cast<int64_t>(dtype_bytes(p.dtype));
    params[p.dtype].first += p.numel;
    params[p.dtype].second += bytes;
    param_count += p.numel;
    param_bytes += bytes;
  }
  const char* producer = tern_model_producer(m);
  const int64_t opset = tern_model_opset(m);
  const char* flops_how =
      "approx: 2 FLOPs per multiply-add of Conv, ConvTranspose, MatMul, Gemm and attention "
      "(ai.onnx Attention, com.microsoft Attention/MultiHeadAttention: QK^T and PV, plus the "
      "QKV projection of com.microsoft Attention); bias adds, element-wise ops, normalizations "
      "and softmax not counted";

  for (const std::string& w : warnings) std::fprintf(stderr, "tern inspect: %s\n", w.c_str());

  // Inputs and outputs, as `tern info MODEL` describes them.
  struct Io {
    std::string name, type;
  };
  std::vector<Io> ins, outs;
  for (int k = 0; k < 2; ++k) {
    const bool in = k == 0;
    const size_t count = in ? tern_model_input_count(m) : tern_model_output_count(m);
    for (size_t i = 0; i < count; ++i) {
      tern_dtype dt{};
      size_t rank = 0;
      const int64_t* dims = nullptr;
      tern_value_kind kind = TERN_VALUE_TENSOR;
      int holds_seq = 0;
      s = in ? tern_model_input_info(m, i, &dt, &rank, &dims)
             : tern_model_output_info(m, i, &dt, &rank, &dims);
      if (s == TERN_OK) {
        s = in ? tern_model_input_kind(m, i, &kind, nullptr, &holds_seq)
               : tern_model_output_kind(m, i, &kind, nullptr, &holds_seq);
      }
      if (s != TERN_OK) return fail("reading model info", s);
      (in ? ins : outs)
          .push_back({in ? tern_model_input_name(m, i) : tern_model_output_name(m, i),
                      io_type_text(kind, holds_seq, dt, dims, rank)});
    }
  }

  if (!dot_path.empty()) {
    FILE* f = std::fopen(dot_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "tern inspect: cannot write '%s'\n", dot_path.c_str());
      return 2;
    }
    std::unordered_map<std::string, size_t> producer_of;
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (const std::string& o : nodes[i].outputs) {
        if (!o.empty()) producer_of[o] = i;
      }
    }
    std::fprintf(f, "digraph model {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n");
    for (const Io& io : ins) {
      std::fprintf(f, "  %s [shape=ellipse, label=%s];\n", json_string("in:" + io.name).c_str(),
                   json_string(io.name + "\\n" + io.type).c_str());
    }
    for (const Io& io : outs) {
      std::fprintf(f, "  %s [shape=ellipse, label=%s];\n", json_string("out:" + io.name).c_str(),
                   json_string(io.name + "\\n" + io.type).c_str());
      auto p = producer_of.find(io.name);
      if (p != producer_of.end()) {
        std::fprintf(f, "  n%zu -> %s;\n", p->second, json_string("out:" + io.name).c_str());
      }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::fprintf(f, "  n%zu [label=%s];\n", i,
                   json_string(nodes[i].op + "\\n" + nodes[i].name).c_str());
      for (const std::string& in : nodes[i].inputs) {
        if (in.empty() || constants.count(in)) continue;  // weights are not drawn
        auto p = producer_of.find(in);
        const auto sh = shapes.find(in);
        const std::string label =
            sh != shapes.end() && sh->second.known ? json_dims(sh->second.dims) : "";
        if (p != producer_of.end()) {
          std::fprintf(f, "  n%zu -> n%zu [label=%s, fontsize=8];\n", p->second, i,
                       json_string(label).c_str());
        } else {
          std::fprintf(f, "  %s -> n%zu;\n", json_string("in:" + in).c_str(), i);
        }
      }
    }
    std::fprintf(f, "}\n");
    if (std::fclose(f) != 0) {
      std::fprintf(stderr, "tern inspect: cannot write '%s'\n", dot_path.c_str());
      return 2;
    }
  }

  int uncounted_total = 0;
  for (const auto& [op, c] : uncounted) uncounted_total += c;
  if (json) {
    std::string o = "{";
    o += "\"model\":" + json_string(path);
    o += ",\"producer\":" + json_string(producer ? producer : "");
    o += ",\"opsets\":{\"ai.onnx\":" + std::to_string(opset) + "}";
    o += ",\"domains\":{";
    bool first = true;
    for (const auto& [d, c] : domains) {
      o += (first ? "" : ",") + json_string(d) + ":" + std::to_string(c);
      first = false;
    }
    for (int k = 0; k < 2; ++k) {
      o += k == 0 ? "},\"inputs\":[" : "],\"outputs\":[";
      first = true;
      for (const Io& io : k == 0 ? ins : outs) {
        o += std::string(first ? "" : ",") + "{\"name\":" + json_string(io.name) +
             ",\"type\":" + json_string(io.type) + "}";
        first = false;
      }
    }
    o += "],\"nodes\":" + std::to_string(nodes.size()) + ",\"op_histogram\":{";
    first = true;
    for (const auto& [op, c] : histogram) {
      o += (first ? "" : ",") + json_string(op) + ":" + std::to_string(c);
      first = false;
    }
    o += "},\"parameters\":{\"count\":" + std::to_string(param_count) +
         ",\"bytes\":" + std::to_string(param_bytes) + ",\"by_dtype\":{";
    first = true;
    for (const auto& [dt, p] : params) {
      o += std::string(first ? "" : ",") + json_string(dtype_label(dt)) +
           ":{\"count\":" + std::to_string(p.first) + ",\"bytes\":" + std::to_string(p.second) +
           "}";
      first = false;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", flops);
    o += "}},\"flops\":{\"total\":" + std::string(buf) + ",\"by_op\":{";
    first = true;
    for (const auto& [op, f] : flops_by_op) {
      std::snprintf(buf, sizeof buf, "%.0f", f);
      o += (first ? "" : ",") + json_string(op) + ":" + buf;
      first = false;
    }
    o += "},\"uncounted_nodes\":" + std::to_string(uncounted_total) +
         ",\"shapes\":" + json_string(shape_note) + ",\"method\":" + json_string(flops_how) + "}}";
    std::printf("%s\n", o.c_str());
    return 0;
  }
  std::printf("model: %s\nproducer: %s\nopset: ai.onnx %lld\n", path.c_str(),
              producer && *producer ? producer : "(none)", static_cast<long long>(opset));
  for (const Io& io : ins) std::printf("input '%s': %s\n", io.name.c_str(), io.type.c_str());
  for (const Io& io : outs) std::printf("output '%s': %s\n", io.name.c_str(), io.type.c_str());
  std::printf("nodes: %zu", nodes.size());
  for (const auto& [d, c] : domains)
    std::printf("%s %s %d", d == domains.begin()->first ? " (" : ",", d.c_str(), c);
  std::printf(")\nop histogram:\n");
  for (const auto& [op, c] : histogram) std::printf("  %-28s %d\n", op.c_str(), c);
  std::printf("parameters: %lld (%s bytes)\n", static_cast<long long>(param_count),
              human(static_cast<double>(param_bytes)).c_str());
  for (const auto& [dt, p] : params) {
    std::printf("  %-10s %lld (%lld bytes)\n", dtype_label(dt), static_cast<long long>(p.first),
                static_cast<long long>(p.second));
  }
  std::printf("FLOPs: %sFLOP (%s)\n", human(flops).c_str(), shape_note.c_str());
  for (const auto& [op, f] : flops_by_op)
    std::printf("  %-28s %sFLOP\n", op.c_str(), human(f).c_str());
  if (uncounted_total) {
    std::printf("  not counted (shapes unknown):");
    for (const auto& [op, c] : uncounted) std::printf(" %s x%d", op.c_str(), c);
    std::printf("\n");
  }
  std::printf("  (%s)\n", flops_how);
  if (!dot_path.empty()) std::printf("wrote %s\n", dot_path.c_str());
  return 0;
}

}  // namespace tern_cli
