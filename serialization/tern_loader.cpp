#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_set>

#include "serialization/model_io.h"
#include "serialization/tern_generated.h"

namespace tern::serialization {

namespace {

constexpr uint64_t kAlign = 64;

// int64 vectors are copied bytewise: FlatBuffers' verifier checks that a vector's 4-byte length
// prefix is aligned, not that 8-byte elements are, so a crafted file may put them at any 4-byte
// boundary (found by tests/fuzz/fuzz_tern_loader). Little-endian hosts only, as FlatBuffers' data.
std::vector<int64_t> read_longs(const flatbuffers::Vector<int64_t>* v) {
  std::vector<int64_t> out;
  if (!v || v->size() == 0) return out;
  out.resize(v->size());
  std::memcpy(out.data(), v->Data(), out.size() * sizeof(int64_t));
  return out;
}

Status check_index(int id, size_t count, bool allow_missing, const char* what) {
  if ((allow_missing && id == -1) || (id >= 0 && static_cast<size_t>(id) < count)) {
    return Status::ok();
  }
  return invalid_model(what, " refers to value ", id, ", but the graph has ", count, " values");
}

// Builds a Graph (and its subgraphs) from the verified buffer; constants point into the mapping.
struct GraphReader {
  std::shared_ptr<void> keep;
  const uint8_t* data;
  uint64_t data_offset;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Segment>>* segments;
  int64_t opset;  // every graph's, subgraphs included

  size_t segment_count() const { return segments ? segments->size() : 0; }

  Status read(const fb::Graph& fg, int depth, Graph* out) {
    if (depth > Graph::kMaxSubgraphDepth) {
      return invalid_model("subgraphs nest deeper than ", Graph::kMaxSubgraphDepth, " levels");
    }
    Graph& g = *out;
    const size_t nv = fg.values() ? fg.values()->size() : 0;
    // A value's or node's messages are prefixed with its name only for an error (a graph has
    // thousands of them); names are checked unique as views of the file's bytes.
    std::unordered_set<std::string_view> names;
    names.reserve(nv);
    for (size_t i = 0; i < nv; ++i) {
      const fb::Value* v = fg.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
      const std::string_view name = v->name() ? v->name()->string_view() : std::string_view();
      Value val;
      val.name = std::string(name);
      const Status st = name.empty() || !names.insert(name).second
                            ? invalid_model("names must be non-empty and unique")
                            : read_value(*v, &val);
      if (!st.is_ok()) return st.with_prefix(str_cat("value ", i, " '", val.name, "'"));
      g.values.push_back(std::move(val));
    }
    if (fg.nodes()) {
      for (size_t i = 0; i < fg.nodes()->size(); ++i) {
        Node node;
        const Status st =
            read_node(*fg.nodes()->Get(static_cast<flatbuffers::uoffset_t>(i)), nv, depth, &node);
        if (!st.is_ok()) {
          return st.with_prefix(str_cat("node ", i, " '", node.name, "' (", node.op_type, ")"));
        }
        g.nodes.push_back(std::move(node));
      }
    }
    if (fg.inputs()) {
      for (int id : *fg.inputs()) {
        TERN_RETURN_IF_ERROR(check_index(id, nv, false, "a graph input"));
        g.inputs.push_back(id);
      }
    }
    if (fg.outputs()) {
      for (int id : *fg.outputs()) {
        TERN_RETURN_IF_ERROR(check_index(id, nv, false, "a graph output"));
        g.outputs.push_back(id);
      }
    }
    if (fg.captured() > g.inputs.size()) {
      return invalid_model("a graph captures ", fg.captured(), " outer values but has ",
                           g.inputs.size(), " inputs");
    }
    g.captured = fg.captured();
    return Status::ok();
  }

  // A value's type and data (its name is read by the caller).
  Status read_value(const fb::Value& v, Value* val) {
    const size_t nseg = segment_count();
    const auto composite = [](int32_t d) { return dtype_is_composite(static_cast<DType>(d)); };
    if (v.dtype() != 0 && !dtype_is_valid(v.dtype()) && !composite(v.dtype())) {
      return invalid_model("dtype ", v.dtype(), " is not valid");
    }
    val->type.dtype = static_cast<DType>(v.dtype());
    if (composite(v.dtype())) {
      const int32_t elem = v.elem(), seq_elem = v.seq_elem();
      const bool elem_ok = elem == 0 || dtype_is_valid(elem) ||
                           (v.dtype() == static_cast<int32_t>(DType::kOptional) &&
                            elem == static_cast<int32_t>(DType::kSequence));
      if (!elem_ok || (seq_elem != 0 && !dtype_is_valid(seq_elem)) || v.segment() != -1) {
        return invalid_model("a ", dtype_name(val->type.dtype), " value with element type ", elem,
                             "/", seq_elem, v.segment() != -1 ? " and constant data" : "");
      }
      val->type.elem = static_cast<DType>(elem);
      val->type.seq_elem = static_cast<DType>(seq_elem);
    }
    val->type.has_shape = v.has_shape();
    if (v.shape()) {
      for (const fb::Dim* d : *v.shape()) {
        val->type.dims.push_back(
            Dim{d->value() < 0 ? -1 : d->value(), d->symbol() ? d->symbol()->str() : ""});
      }
    }
    if (v.segment() != -1) {
      if (v.segment() < 0 || static_cast<size_t>(v.segment()) >= nseg) {
        return invalid_model("segment ", v.segment(), " out of range (", nseg, ")");
      }
      if (dtype_size(val->type.dtype) == 0 || val->type.dtype == DType::kString) {
        return invalid_model("constant without a non-string dtype");
      }
      const Shape shape = read_longs(v.const_shape());
      auto n = checked_numel(shape);
      if (!n) return invalid_model(n.status().message());
      const fb::Segment* s = segments->Get(static_cast<flatbuffers::uoffset_t>(v.segment()));
      // (By division: n * size may wrap around, 2^61 int64s "needing" 0 bytes.)
      const uint64_t elem = dtype_size(val->type.dtype);
      if (s->length() % elem != 0 || static_cast<uint64_t>(*n) != s->length() / elem) {
        return invalid_model("shape ", shape_str(shape), " needs ", *n, " elements of ", elem,
                             " bytes, its segment holds ", s->length(), " bytes");
      }
      void* ptr = const_cast<uint8_t*>(data + data_offset + s->offset());
      val->constant = Tensor::wrap(val->type.dtype, shape, ptr, keep);
    }
    if (v.packed() && v.packed()->size()) {
      if (!val->constant) return invalid_model("packed data on a value that is not a constant");
      for (size_t k = 0; k < v.packed()->size(); ++k) {
        const fb::PackedData* pd = v.packed()->Get(static_cast<flatbuffers::uoffset_t>(k));
        if (!pd->key() || pd->key()->size() == 0) {
          return invalid_model("packed data ", k, " has no key");
        }
        if (pd->segment() < 0 || static_cast<size_t>(pd->segment()) >= nseg) {
          return invalid_model("packed data ", k, " segment ", pd->segment(), " out of range (",
                               nseg, ")");
        }
        const fb::Segment* s = segments->Get(static_cast<flatbuffers::uoffset_t>(pd->segment()));
        void* ptr = const_cast<uint8_t*>(data + data_offset + s->offset());
        val->packed.push_back(PackedData{
            pd->key()->str(),
            Tensor::wrap(DType::kUInt8, {static_cast<int64_t>(s->length())}, ptr, keep)});
      }
    }
    return Status::ok();
  }

  Status read_node(const fb::Node& n, size_t nv, int depth, Node* node) {
    node->name = n.name() ? n.name()->str() : "";
    node->op_type = n.op_type() ? n.op_type()->str() : "";
    node->domain = n.domain() ? n.domain()->str() : "";
    if (node->op_type.empty()) return invalid_model("no op type");
    if (n.inputs()) {
      node->inputs.reserve(n.inputs()->size());
      for (int id : *n.inputs()) {
        TERN_RETURN_IF_ERROR(check_index(id, nv, true, "an input"));
        node->inputs.push_back(id);
      }
    }
    if (n.outputs()) {
      node->outputs.reserve(n.outputs()->size());
      for (int id : *n.outputs()) {
        TERN_RETURN_IF_ERROR(check_index(id, nv, true, "an output"));
        node->outputs.push_back(id);
      }
    }
    if (n.attributes()) {
      for (const fb::Attribute* a : *n.attributes()) {
        std::string name = a->name() ? a->name()->str() : "";
        if (name.empty()) return invalid_model("an attribute has no name");
        auto attr = attribute(*a, depth);
        if (!attr) return attr.status().with_prefix(str_cat("attribute '", name, "'"));
        node->attrs.set(name, std::move(*attr));
      }
    }
    return Status::ok();
  }

  Expected<std::shared_ptr<const Graph>> subgraph(const fb::Graph* fg, int depth) {
    if (!fg) return invalid_model("the subgraph is missing");
    Graph g;
    g.opset = opset;
    TERN_RETURN_IF_ERROR(read(*fg, depth + 1, &g));
    return std::make_shared<const Graph>(std::move(g));
  }

  Expected<Attribute> attribute(const fb::Attribute& a, int depth) {
    Attribute out;
    out.kind = static_cast<Attribute::Kind>(a.kind());
    switch (a.kind()) {
      case fb::AttributeKind::Float:
        out.f = a.f();
        break;
      case fb::AttributeKind::Int:
        out.i = a.i();
        break;
      case fb::AttributeKind::String:
        out.s = a.s() ? a.s()->str() : "";
        break;
      case fb::AttributeKind::Ints:
        out.ints = read_longs(a.ints());
        break;
      case fb::AttributeKind::Type:
        out.ints = read_longs(a.ints());
        if (out.ints.size() != 3) return invalid_model("a type attribute holds 3 ints");
        break;
      case fb::AttributeKind::Floats:
        if (a.floats()) out.floats.assign(a.floats()->begin(), a.floats()->end());
        break;
      case fb::AttributeKind::Strings:
        if (a.strings()) {
          for (const auto* s : *a.strings()) out.strings.push_back(s ? s->str() : "");
        }
        break;
      case fb::AttributeKind::Tensor: {
        const fb::InlineTensor* t = a.t();
        if (!t || !dtype_is_valid(t->dtype()) ||
            t->dtype() == static_cast<int32_t>(DType::kString) ||
            dtype_size(static_cast<DType>(t->dtype())) == 0) {
          return invalid_model("tensor has no valid non-string dtype");
        }
        const Shape shape = read_longs(t->shape());
        auto n = checked_numel(shape);
        if (!n) return invalid_model(n.status().message());
        const size_t elem = dtype_size(static_cast<DType>(t->dtype()));
        const size_t have = t->data() ? t->data()->size() : 0;
        if (have % elem != 0 || static_cast<uint64_t>(*n) != have / elem) {  // (no wrap-around)
          return invalid_model("tensor holds ", have, " bytes, its shape needs ", *n,
                               " elements of ", elem, " bytes");
        }
        const size_t bytes = have;
        TERN_ASSIGN_OR_RETURN(out.t, Tensor::allocate(static_cast<DType>(t->dtype()), shape));
        if (bytes) std::memcpy(out.t.raw(), t->data()->data(), bytes);
        break;
      }
      case fb::AttributeKind::Graph: {
        TERN_ASSIGN_OR_RETURN(out.g, subgraph(a.g(), depth));
        break;
      }
      case fb::AttributeKind::Graphs: {
        if (!a.graphs()) break;
        for (const fb::Graph* sub : *a.graphs()) {
          TERN_ASSIGN_OR_RETURN(auto g, subgraph(sub, depth));
          out.graphs.push_back(std::move(g));
        }
        break;
      }
      default:
        return invalid_model("unknown attribute kind ", static_cast<int>(a.kind()));
    }
    return out;
  }
};

}  // namespace

Expected<Graph> load_tern(std::shared_ptr<void> keep, const uint8_t* data, size_t size) {
  if (size < 8 || !flatbuffers::BufferHasIdentifier(data, fb::ModelIdentifier())) {
    return invalid_model("not a .tern file (no \"TERN\" identifier at byte 4)");
  }
  // The FlatBuffer itself is small; verify it within what FlatBuffers can address.
  size_t fb_size = std::min<size_t>(size, FLATBUFFERS_MAX_BUFFER_SIZE - 1);
  flatbuffers::Verifier verifier(data, fb_size);
  if (!fb::VerifyModelBuffer(verifier)) {
    return invalid_model("the .tern FlatBuffer failed verification (truncated or corrupted)");
  }
  const fb::Model* m = fb::GetModel(data);
  if (m->format_version() == 0 || m->format_version() > kFormatVersion) {
    return invalid_model(".tern format version ", m->format_version(),
                         " is not supported (this library reads 1 to ", kFormatVersion, ")");
  }
  const uint64_t data_offset = m->data_offset();
  if (data_offset % kAlign != 0 || data_offset > size) {
    return invalid_model("data_offset ", data_offset,
                         " is not 64-aligned or lies past the end "
                         "of the ",
                         size, "-byte file");
  }
  const uint64_t area = size - data_offset;
  const auto* segments = m->segments();
  const size_t nseg = segments ? segments->size() : 0;
  for (size_t i = 0; i < nseg; ++i) {
    const fb::Segment* s = segments->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (s->offset() % kAlign != 0 || s->offset() > area || s->length() > area - s->offset()) {
      return invalid_model("segment ", i, " (offset ", s->offset(), ", length ", s->length(),
                           ") is unaligned or lies outside the file's ", area, "-byte data area");
    }
  }
  const fb::Graph* fg = m->graph();
  if (!fg || !fg->values()) return invalid_model("the .tern file has no graph");
  GraphReader reader{keep, data, data_offset, segments, m->opset()};
  Graph g;
  TERN_RETURN_IF_ERROR(reader.read(*fg, 0, &g));
  g.opset = m->opset();
  if (g.captured != 0) return invalid_model("the main graph cannot capture outer values");
  if (m->producer()) g.producer = m->producer()->str();
  if (m->metadata()) {
    for (const auto* e : *m->metadata()) {
      g.metadata.emplace_back(e->key() ? e->key()->str() : "", e->value() ? e->value()->str() : "");
    }
  }
  return g;
}

}  // namespace tern::serialization
