// ONNX ModelProto -> core::Graph. Constant nodes become constant values; everything else keeps
// ONNX's op types and attributes, so op semantics stay ONNX's.
#include <onnx/onnx_pb.h>

#include <climits>
#include <unordered_map>
#include <unordered_set>

#include "core/onnx_schema.h"
#include "serialization/model_io.h"
#include "serialization/onnx_tensor.h"

namespace tern::serialization {

namespace {

// The newest ai.onnx opset whose operators this importer and the op schemas follow (the public
// conformance corpus' newest tests are of this opset).
constexpr int64_t kNewestOpset = 28;
// The oldest opset the importer accepts (ONNX Runtime's oldest too). Ops of opsets 1-6 carried
// attributes and broadcasting rules (consumed_inputs, is_test, broadcast/axis on element-wise ops)
// the schemas do not implement, so an older model is refused by its opset number.
constexpr int64_t kOldestOpset = 7;

class Importer {
 public:
  // `parent`: the importer of the enclosing graph when this one imports a subgraph.
  Importer(std::string base_dir, Importer* parent = nullptr)
      : base_dir_(std::move(base_dir)), parent_(parent) {}

  Expected<Graph> run(const onnx::ModelProto& mp) {
    if (!mp.has_graph()) return invalid_model("the ONNX model has no graph");
    for (const auto& op : mp.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") g_.opset = op.version();
    }
    if (g_.opset == 0) {
      if (mp.opset_import_size() > 0) {
        return unsupported("the ONNX model imports no ai.onnx opset (only '",
                           mp.opset_import(0).domain(), "')");
      }
      g_.opset = 1;  // IR < 3 models carry no opset_import; opset 1 is what they meant
    }
    if (g_.opset < kOldestOpset) {
      return unsupported("the ONNX model imports opset ", g_.opset, " of ai.onnx, older than ",
                         kOldestOpset,
                         ", the oldest Tern supports; convert it first "
                         "(onnx.version_converter.convert_version(model, 7) or newer)");
    }
    if (g_.opset > kNewestOpset) {
      return unsupported("the ONNX model imports opset ", g_.opset,
                         " of ai.onnx; this importer "
                         "knows opsets ",
                         kOldestOpset, " to ", kNewestOpset,
                         " (an op's meaning may have changed since)");
    }
    g_.producer =
        mp.producer_name() + (mp.producer_version().empty() ? "" : " " + mp.producer_version());
    for (const auto& kv : mp.metadata_props()) g_.metadata.emplace_back(kv.key(), kv.value());
    TERN_RETURN_IF_ERROR(import_graph(mp.graph()));
    return std::move(g_);
  }

 private:
  // The graph's values, nodes, inputs and outputs. In a subgraph, a name that nothing in it
  // defines is a value of an enclosing graph: it becomes a captured input (Graph::captured).
  Status import_graph(const onnx::GraphProto& gp) {
    if (gp.sparse_initializer_size() > 0) return unsupported("sparse initializers");
    if (parent_) {
      for (const auto& init : gp.initializer()) local_.insert(init.name());
      for (const auto& vi : gp.input()) local_.insert(vi.name());
      for (const auto& n : gp.node()) local_.insert(n.output().begin(), n.output().end());
    }
    for (const auto& init : gp.initializer()) {
      if (init.name().empty()) return invalid_model("an initializer has no name");
      // import_onnx's ModelProto is a local it drops after this import, and not const: its
      // initializers' bytes move into the graph's tensors instead of being copied.
      auto t = take_tensor_from_onnx(const_cast<onnx::TensorProto&>(init), base_dir_);
      if (!t) return t.status().with_prefix(str_cat("initializer '", init.name(), "'"));
      int id = value(init.name());
      g_.values[static_cast<size_t>(id)].constant = std::move(*t);
      g_.values[static_cast<size_t>(id)].type.dtype =
          g_.values[static_cast<size_t>(id)].constant->dtype();
    }
    for (const auto& vi : gp.input()) {
      if (vi.name().empty()) return invalid_model("a graph input has no name");
      int id = value(vi.name());
      // With an initializer (every weight before IR 4): an optional input, the initializer its
      // default; its type is the initializer's.
      if (!g_.values[static_cast<size_t>(id)].constant) {
        TERN_RETURN_IF_ERROR(
            read_type(vi, id).with_prefix(str_cat("graph input '", vi.name(), "'")));
      }
      g_.inputs.push_back(id);
    }
    for (int i = 0; i < gp.node_size(); ++i) TERN_RETURN_IF_ERROR(add_node(gp.node(i), i));
    for (const auto& vi : gp.value_info()) {
      auto it = ids_.find(vi.name());
      if (it != ids_.end() && !g_.values[static_cast<size_t>(it->second)].constant) {
        (void)read_type(vi, it->second);  // hints only: a type we cannot read is ignored
      }
    }
    for (const auto& vi : gp.output()) {
      if (vi.name().empty()) return invalid_model("a graph output has no name");
      if (parent_ && !local_.count(vi.name())) (void)ref(vi.name());  // an outer value, passed on
      auto it = ids_.find(vi.name());
      if (it == ids_.end())
        return invalid_model("graph output '", vi.name(), "' is never produced");
      if (!g_.values[static_cast<size_t>(it->second)].constant) {
        TERN_RETURN_IF_ERROR(
            read_type(vi, it->second).with_prefix(str_cat("graph output '", vi.name(), "'")));
      }
      g_.outputs.push_back(it->second);
    }
    g_.inputs.insert(g_.inputs.end(), captured_.begin(), captured_.end());
    g_.captured = captured_.size();
    return Status::ok();
  }

  int value(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    int id = g_.add_value(name);
    ids_[name] = id;
    return id;
  }

  // A name a node reads: this graph's value, or, in a subgraph, an enclosing graph's (captured
  // here once, and resolved by the enclosing importer when it adds the node holding this graph).
  int ref(const std::string& name) {
    if (!parent_ || local_.count(name) || ids_.count(name)) return value(name);
    const int id = value(name);
    captured_.push_back(id);
    return id;
  }

  // A subgraph attribute: imported by an importer of its own; the node then passes the outer
  // values the subgraph captured (see add_node).
  Expected<std::shared_ptr<const Graph>> read_subgraph(const onnx::GraphProto& gp) {
    if (depth() >= Graph::kMaxSubgraphDepth) {
      return invalid_model("subgraphs nest deeper than ", Graph::kMaxSubgraphDepth, " levels");
    }
    Importer sub(base_dir_, this);
    sub.g_.opset = g_.opset;
    TERN_RETURN_IF_ERROR(sub.import_graph(gp));
    return std::make_shared<const Graph>(std::move(sub.g_));
  }

  int depth() const { return parent_ ? parent_->depth() + 1 : 0; }

  Status read_type(const onnx::ValueInfoProto& vi, int id) {
    if (!vi.has_type()) return Status::ok();
    return read_type_proto(vi.type(), &g_.values[static_cast<size_t>(id)].type, 0);
  }

  // A tensor type; a sequence of tensors; an optional tensor or sequence of tensors (maps and
  // sequences of sequences are refused).
  static Status read_type_proto(const onnx::TypeProto& tp, ValueType* type, int depth) {
    if (tp.has_sequence_type()) {
      const auto& inner = tp.sequence_type().elem_type();
      if (depth > 1 || !inner.has_tensor_type()) {
        return unsupported("only sequences of tensors are supported");
      }
      ValueType elem;
      TERN_RETURN_IF_ERROR(read_type_proto(inner, &elem, depth + 1));
      type->dtype = DType::kSequence;
      type->elem = elem.dtype;
      type->has_shape = elem.has_shape;
      type->dims = elem.dims;
      return Status::ok();
    }
    if (tp.has_optional_type()) {
      const auto& inner = tp.optional_type().elem_type();
      if (depth > 0 || (!inner.has_tensor_type() && !inner.has_sequence_type())) {
        return unsupported("only optional tensors and optional sequences are supported");
      }
      ValueType elem;
      TERN_RETURN_IF_ERROR(read_type_proto(inner, &elem, depth + 1));
      type->dtype = DType::kOptional;
      type->elem = elem.dtype;
      type->seq_elem = elem.elem;
      type->has_shape = elem.has_shape;
      type->dims = elem.dims;
      return Status::ok();
    }
    if (!tp.has_tensor_type()) {
      return unsupported("only tensor, sequence and optional types are supported (maps are not)");
    }
    const auto& tt = tp.tensor_type();
    if (tt.elem_type() != 0) {
      if (!dtype_is_valid(tt.elem_type())) {
        return unsupported("element type ", tt.elem_type(), " is not supported");
      }
      type->dtype = static_cast<DType>(tt.elem_type());
    }
    if (tt.has_shape()) {
      type->has_shape = true;
      type->dims.clear();
      for (const auto& d : tt.shape().dim()) {
        Dim dim;
        if (d.has_dim_value() && d.dim_value() >= 0) dim.value = d.dim_value();
        if (d.has_dim_param()) dim.symbol = d.dim_param();
        type->dims.push_back(dim);
      }
    }
    return Status::ok();
  }

  Expected<Attribute> read_attribute(const onnx::AttributeProto& a) {
    Attribute out;
    if (!a.ref_attr_name().empty()) return unsupported("attribute references (functions)");
    switch (a.type()) {
      case onnx::AttributeProto::FLOAT:
        out.kind = Attribute::Kind::kFloat;
        out.f = a.f();
        break;
      case onnx::AttributeProto::INT:
        out.kind = Attribute::Kind::kInt;
        out.i = a.i();
        break;
      case onnx::AttributeProto::STRING:
        out.kind = Attribute::Kind::kString;
        out.s = a.s();
        break;
      case onnx::AttributeProto::FLOATS:
        out.kind = Attribute::Kind::kFloats;
        out.floats.assign(a.floats().begin(), a.floats().end());
        break;
      case onnx::AttributeProto::INTS:
        out.kind = Attribute::Kind::kInts;
        out.ints.assign(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto::STRINGS:
        out.kind = Attribute::Kind::kStrings;
        out.strings.assign(a.strings().begin(), a.strings().end());
        break;
      case onnx::AttributeProto::TENSOR: {
        out.kind = Attribute::Kind::kTensor;
        TERN_ASSIGN_OR_RETURN(out.t, tensor_from_onnx(a.t(), base_dir_));
        break;
      }
      case onnx::AttributeProto::TYPE_PROTO: {
        ValueType t;
        TERN_RETURN_IF_ERROR(read_type_proto(a.tp(), &t, 0));
        out.kind = Attribute::Kind::kType;
        out.ints = {static_cast<int64_t>(t.dtype), static_cast<int64_t>(t.elem),
                    static_cast<int64_t>(t.seq_elem)};
        break;
      }
      case onnx::AttributeProto::GRAPH: {
        out.kind = Attribute::Kind::kGraph;
        TERN_ASSIGN_OR_RETURN(out.g, read_subgraph(a.g()));
        break;
      }
      case onnx::AttributeProto::GRAPHS: {
        out.kind = Attribute::Kind::kGraphs;
        for (const auto& gp : a.graphs()) {
          TERN_ASSIGN_OR_RETURN(auto g, read_subgraph(gp));
          out.graphs.push_back(std::move(g));
        }
        break;
      }
      default:
        return unsupported("attribute type ", onnx::AttributeProto::AttributeType_Name(a.type()));
    }
    return out;
  }

  std::string describe(const onnx::NodeProto& n, int index) const {
    return str_cat("node '", n.name().empty() ? str_cat("#", index) : n.name(), "' (", n.op_type(),
                   ")");
  }

  // Constant nodes become constant values directly (ONNX's value, value_float(s), value_int(s)).
  Status add_constant(const onnx::NodeProto& n, const std::string& where) {
    if (n.output_size() != 1 || n.output(0).empty() || n.attribute_size() != 1) {
      return invalid_model(where, ": a Constant has one output and one value attribute");
    }
    const onnx::AttributeProto& a = n.attribute(0);
    Tensor t;
    if (a.name() == "value") {
      TERN_ASSIGN_OR_RETURN(t, tensor_from_onnx(a.t(), base_dir_));
    } else if (a.name() == "value_float") {
      TERN_ASSIGN_OR_RETURN(t, Tensor::allocate(DType::kFloat32, {}));
      *t.data<float>() = a.f();
    } else if (a.name() == "value_int") {
      TERN_ASSIGN_OR_RETURN(t, Tensor::allocate(DType::kInt64, {}));
      *t.data<int64_t>() = a.i();
    } else if (a.name() == "value_floats") {
      TERN_ASSIGN_OR_RETURN(t, Tensor::allocate(DType::kFloat32, {a.floats_size()}));
      std::copy(a.floats().begin(), a.floats().end(), t.data<float>());
    } else if (a.name() == "value_ints") {
      TERN_ASSIGN_OR_RETURN(t, Tensor::allocate(DType::kInt64, {a.ints_size()}));
      std::copy(a.ints().begin(), a.ints().end(), t.data<int64_t>());
    } else {
      return unsupported(where, ": Constant attribute '", a.name(), "'");
    }
    int id = value(n.output(0));
    Value& v = g_.values[static_cast<size_t>(id)];
    if (v.constant) return invalid_model(where, ": output '", n.output(0), "' is already defined");
    v.type.dtype = t.dtype();
    v.constant = std::move(t);
    return Status::ok();
  }

  Status add_node(const onnx::NodeProto& n, int index) {
    const std::string where = describe(n, index);
    if ((n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "Constant") {
      return add_constant(n, where);
    }
    Node node;
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    for (const auto& in : n.input()) node.inputs.push_back(in.empty() ? -1 : ref(in));
    for (const auto& out : n.output()) node.outputs.push_back(out.empty() ? -1 : value(out));
    for (const auto& a : n.attribute()) {
      if (a.name().empty()) return invalid_model(where, ": an attribute has no name");
      auto attr = read_attribute(a);
      if (!attr) return attr.status().with_prefix(str_cat(where, ": attribute '", a.name(), "'"));
      node.attrs.set(a.name(), std::move(*attr));
    }
    // The outer values each subgraph reads, after the formal inputs (Graph::captured).
    for (const Graph* sub : subgraphs_of(node)) {
      for (size_t k = sub->inputs.size() - sub->captured; k < sub->inputs.size(); ++k) {
        node.inputs.push_back(ref(sub->value_name(sub->inputs[k])));
      }
    }
    g_.nodes.push_back(std::move(node));
    return Status::ok();
  }

  std::string base_dir_;
  Importer* parent_;
  Graph g_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_set<std::string> local_;  // subgraphs: the names this graph defines
  std::vector<int> captured_;              // subgraphs: values read from enclosing graphs
};

}  // namespace

Expected<Graph> import_onnx(const uint8_t* data, size_t size, const std::string& base_dir) {
  if (size > static_cast<size_t>(INT_MAX)) {
    return unsupported("ONNX files over 2 GB must keep their weights as external data");
  }
  onnx::ModelProto mp;
  if (!mp.ParseFromArray(data, static_cast<int>(size))) {
    return invalid_model(
        "not a .tern file and not a valid ONNX ModelProto (protobuf parsing "
        "failed: truncated or corrupted)");
  }
  return Importer(base_dir).run(mp);
}

}  // namespace tern::serialization
