#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <unordered_map>
#include <vector>

#include "serialization/model_io.h"
#include "serialization/tern_generated.h"

namespace tern::serialization {

namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Where each constant's bytes go: segments are numbered constants first (the main graph's values
// in order, then each subgraph's, depth first), then the packed layouts in the same order.
struct SegmentPlan {
  std::vector<const Tensor*> data;                               // by segment
  std::vector<uint64_t> offset;                                  // by segment, from data_offset
  std::unordered_map<const Value*, int> of_value;                // constant segment by value
  std::unordered_map<const Value*, std::vector<int>> of_packed;  // packed segments by value
};

// The main graph and every subgraph inside it, depth first.
void for_each_graph(const Graph& g, const std::function<void(const Graph&)>& fn) {
  fn(g);
  for (const Node& n : g.nodes) {
    for (const Graph* sub : subgraphs_of(n)) for_each_graph(*sub, fn);
  }
}

class Builder {
 public:
  Builder(flatbuffers::FlatBufferBuilder& b, const SegmentPlan& plan) : b_(b), plan_(plan) {}

  flatbuffers::Offset<fb::Graph> graph(const Graph& g) {
    std::vector<flatbuffers::Offset<fb::Value>> values;
    for (const Value& v : g.values) values.push_back(value(v));
    std::vector<flatbuffers::Offset<fb::Node>> nodes;
    for (const Node& n : g.nodes) {
      std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
      for (const auto& kv : n.attrs.all()) attrs.push_back(attribute(kv.first, kv.second));
      nodes.push_back(fb::CreateNode(b_, b_.CreateString(n.name), b_.CreateString(n.op_type),
                                     b_.CreateString(n.domain), b_.CreateVector(n.inputs),
                                     b_.CreateVector(n.outputs), b_.CreateVector(attrs)));
    }
    return fb::CreateGraph(b_, b_.CreateVector(values), b_.CreateVector(nodes),
                           b_.CreateVector(g.inputs), b_.CreateVector(g.outputs),
                           static_cast<uint32_t>(g.captured));
  }

 private:
  flatbuffers::Offset<fb::Value> value(const Value& v) {
    std::vector<flatbuffers::Offset<fb::Dim>> dims;
    for (const Dim& d : v.type.dims) {
      dims.push_back(fb::CreateDim(b_, d.value, d.symbol.empty() ? 0 : b_.CreateString(d.symbol)));
    }
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> const_shape;
    DType dtype = v.type.dtype;
    int segment = -1;
    if (v.constant) {
      const_shape = b_.CreateVector(std::vector<int64_t>(v.constant->shape()));
      dtype = v.constant->dtype();
      segment = plan_.of_value.at(&v);
    }
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::PackedData>>> packed;
    auto it = plan_.of_packed.find(&v);
    if (it != plan_.of_packed.end() && !it->second.empty()) {
      std::vector<flatbuffers::Offset<fb::PackedData>> list;
      for (size_t k = 0; k < it->second.size(); ++k) {
        list.push_back(fb::CreatePackedData(b_, b_.CreateString(v.packed[k].key), it->second[k]));
      }
      packed = b_.CreateVector(list);
    }
    return fb::CreateValue(b_, b_.CreateString(v.name), static_cast<int32_t>(dtype),
                           v.type.has_shape, b_.CreateVector(dims), segment, const_shape, packed,
                           static_cast<int32_t>(v.type.elem),
                           static_cast<int32_t>(v.type.seq_elem));
  }

  flatbuffers::Offset<fb::Attribute> attribute(const std::string& name, const Attribute& a) {
    flatbuffers::Offset<fb::InlineTensor> t;
    if (a.kind == Attribute::Kind::kTensor) {
      std::vector<int64_t> shape(a.t.shape().begin(), a.t.shape().end());
      t = fb::CreateInlineTensor(
          b_, static_cast<int32_t>(a.t.dtype()), b_.CreateVector(shape),
          b_.CreateVector(static_cast<const uint8_t*>(a.t.raw()), a.t.byte_size()));
    }
    flatbuffers::Offset<fb::Graph> g;
    if (a.kind == Attribute::Kind::kGraph) g = graph(*a.g);
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Graph>>> graphs;
    if (a.kind == Attribute::Kind::kGraphs) {
      std::vector<flatbuffers::Offset<fb::Graph>> list;
      for (const auto& sub : a.graphs) list.push_back(graph(*sub));
      graphs = b_.CreateVector(list);
    }
    auto n = b_.CreateString(name);
    auto s = a.kind == Attribute::Kind::kString ? b_.CreateString(a.s) : 0;
    auto ints = a.kind == Attribute::Kind::kInts || a.kind == Attribute::Kind::kType
                    ? b_.CreateVector(a.ints)
                    : 0;
    auto floats = a.kind == Attribute::Kind::kFloats ? b_.CreateVector(a.floats) : 0;
    auto strings = a.kind == Attribute::Kind::kStrings ? b_.CreateVectorOfStrings(a.strings) : 0;
    return fb::CreateAttribute(b_, n, static_cast<fb::AttributeKind>(a.kind), a.i, a.f, s, ints,
                               floats, strings, t, g, graphs);
  }

  flatbuffers::FlatBufferBuilder& b_;
  const SegmentPlan& plan_;
};

// Whether the graph needs format 2: subgraphs, or values that are sequences or optionals.
bool has_subgraphs(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [](const Node& n) { return !subgraphs_of(n).empty(); }) ||
         std::any_of(g.values.begin(), g.values.end(),
                     [](const Value& v) { return dtype_is_composite(v.type.dtype); });
}

// Builds the FlatBuffer with the given data_offset; segment offsets are relative to it.
void build(flatbuffers::FlatBufferBuilder& b, const Graph& g, const SegmentPlan& plan,
           uint64_t data_offset) {
  std::vector<flatbuffers::Offset<fb::Segment>> segments;
  for (size_t s = 0; s < plan.data.size(); ++s) {
    segments.push_back(fb::CreateSegment(b, plan.offset[s], plan.data[s]->byte_size()));
  }
  auto graph = Builder(b, plan).graph(g);
  std::vector<flatbuffers::Offset<fb::MetadataEntry>> meta;
  for (const auto& kv : g.metadata) {
    meta.push_back(fb::CreateMetadataEntry(b, b.CreateString(kv.first), b.CreateString(kv.second)));
  }
  // The oldest version that can read the file: a model without subgraphs stays readable by
  // libraries that know format 1 only.
  const uint32_t version = has_subgraphs(g) ? kFormatVersion : 1;
  auto model = fb::CreateModel(b, version, b.CreateString(g.producer), g.opset, graph,
                               b.CreateVector(segments), data_offset, b.CreateVector(meta));
  fb::FinishModelBuffer(b, model);
}

}  // namespace

bool tern_writer_built() {
  return true;
}

Status tern_writer_refusal(const std::string&) {
  return Status::ok();
}

Status save_tern(const Graph& g, const std::string& path) {
  SegmentPlan plan;
  uint64_t cursor = 0;
  auto add = [&](const Tensor* t) {
    plan.data.push_back(t);
    plan.offset.push_back(cursor);
    cursor = align_up(cursor + t->byte_size());
    return static_cast<int>(plan.data.size() - 1);
  };
  Status st;
  for_each_graph(g, [&](const Graph& graph) {
    for (const Value& v : graph.values) {
      if (!v.constant || !st.is_ok()) continue;
      if (v.constant->dtype() == DType::kString) {
        st = unsupported("constant '", v.name,
                         "' is a string tensor; .tern segments hold fixed-width data only");
        continue;
      }
      plan.of_value[&v] = add(&*v.constant);
    }
  });
  TERN_RETURN_IF_ERROR(st);
  for_each_graph(g, [&](const Graph& graph) {
    for (const Value& v : graph.values) {
      for (const PackedData& p : v.packed) {
        if (!v.constant) {
          st = internal_error("value '", v.name, "' has packed data but no constant");
          return;
        }
        plan.of_packed[&v].push_back(add(&p.data));
      }
    }
  });
  TERN_RETURN_IF_ERROR(st);
  // The buffer's size does not depend on data_offset's value (a fixed-width field that is always
  // written), so build once to learn the size, then again with the real offset.
  flatbuffers::FlatBufferBuilder probe;
  probe.ForceDefaults(true);
  build(probe, g, plan, 0);
  const uint64_t data_offset = align_up(probe.GetSize());
  flatbuffers::FlatBufferBuilder b;
  b.ForceDefaults(true);
  build(b, g, plan, data_offset);
  if (b.GetSize() != probe.GetSize()) return internal_error(".tern writer: unstable buffer size");

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return io_error("cannot open '", tmp, "' for writing");
    static const char zeros[kAlign] = {};
    f.write(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
    f.write(zeros, static_cast<std::streamsize>(data_offset - b.GetSize()));
    uint64_t written = 0;
    for (size_t k = 0; k < plan.data.size(); ++k) {
      const Tensor& t = *plan.data[k];
      f.write(zeros, static_cast<std::streamsize>(plan.offset[k] - written));
      f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.byte_size()));
      written = plan.offset[k] + t.byte_size();
    }
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return io_error("writing '", tmp, "' failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return io_error("cannot rename '", tmp, "' to '", path, "'");
  }
  return Status::ok();
}

}  // namespace tern::serialization
