#include <cstdio>
#include <fstream>
#include <vector>

#include "serialization/model_io.h"
#include "serialization/tern_generated.h"

namespace tern::serialization {

namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

flatbuffers::Offset<fb::Attribute> write_attribute(flatbuffers::FlatBufferBuilder& b,
                                                   const std::string& name, const Attribute& a) {
  flatbuffers::Offset<fb::InlineTensor> t;
  if (a.kind == Attribute::Kind::kTensor) {
    std::vector<int64_t> shape(a.t.shape().begin(), a.t.shape().end());
    t = fb::CreateInlineTensor(
        b, static_cast<int32_t>(a.t.dtype()), b.CreateVector(shape),
        b.CreateVector(static_cast<const uint8_t*>(a.t.raw()), a.t.byte_size()));
  }
  auto n = b.CreateString(name);
  auto s = a.kind == Attribute::Kind::kString ? b.CreateString(a.s) : 0;
  auto ints = a.kind == Attribute::Kind::kInts ? b.CreateVector(a.ints) : 0;
  auto floats = a.kind == Attribute::Kind::kFloats ? b.CreateVector(a.floats) : 0;
  auto strings = a.kind == Attribute::Kind::kStrings ? b.CreateVectorOfStrings(a.strings) : 0;
  return fb::CreateAttribute(b, n, static_cast<fb::AttributeKind>(a.kind), a.i, a.f, s, ints,
                             floats, strings, t);
}

// Where each value's bytes go: segments are numbered constants first (in value order), then the
// packed layouts (in value order).
struct SegmentPlan {
  std::vector<const Tensor*> data;          // by segment
  std::vector<uint64_t> offset;             // by segment, relative to data_offset
  std::vector<int> of_value;                // constant segment by value, -1 for none
  std::vector<std::vector<int>> of_packed;  // packed segments by value
};

// Builds the FlatBuffer with the given data_offset; segment offsets are relative to it.
void build(flatbuffers::FlatBufferBuilder& b, const Graph& g, const SegmentPlan& plan,
           uint64_t data_offset) {
  std::vector<flatbuffers::Offset<fb::Value>> values;
  std::vector<flatbuffers::Offset<fb::Segment>> segments;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    std::vector<flatbuffers::Offset<fb::Dim>> dims;
    for (const Dim& d : v.type.dims) {
      dims.push_back(fb::CreateDim(b, d.value, d.symbol.empty() ? 0 : b.CreateString(d.symbol)));
    }
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> const_shape;
    DType dtype = v.type.dtype;
    if (v.constant) {
      const_shape = b.CreateVector(std::vector<int64_t>(v.constant->shape()));
      dtype = v.constant->dtype();
    }
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::PackedData>>> packed;
    if (!plan.of_packed[i].empty()) {
      std::vector<flatbuffers::Offset<fb::PackedData>> list;
      for (size_t k = 0; k < plan.of_packed[i].size(); ++k) {
        list.push_back(
            fb::CreatePackedData(b, b.CreateString(v.packed[k].key), plan.of_packed[i][k]));
      }
      packed = b.CreateVector(list);
    }
    values.push_back(fb::CreateValue(b, b.CreateString(v.name), static_cast<int32_t>(dtype),
                                     v.type.has_shape, b.CreateVector(dims), plan.of_value[i],
                                     const_shape, packed));
  }
  for (size_t s = 0; s < plan.data.size(); ++s) {
    segments.push_back(fb::CreateSegment(b, plan.offset[s], plan.data[s]->byte_size()));
  }
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  for (const Node& n : g.nodes) {
    std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
    for (const auto& kv : n.attrs.all()) attrs.push_back(write_attribute(b, kv.first, kv.second));
    nodes.push_back(fb::CreateNode(b, b.CreateString(n.name), b.CreateString(n.op_type),
                                   b.CreateString(n.domain), b.CreateVector(n.inputs),
                                   b.CreateVector(n.outputs), b.CreateVector(attrs)));
  }
  auto graph = fb::CreateGraph(b, b.CreateVector(values), b.CreateVector(nodes),
                               b.CreateVector(g.inputs), b.CreateVector(g.outputs));
  std::vector<flatbuffers::Offset<fb::MetadataEntry>> meta;
  for (const auto& kv : g.metadata) {
    meta.push_back(fb::CreateMetadataEntry(b, b.CreateString(kv.first), b.CreateString(kv.second)));
  }
  auto model = fb::CreateModel(b, kFormatVersion, b.CreateString(g.producer), g.opset, graph,
                               b.CreateVector(segments), data_offset, b.CreateVector(meta));
  fb::FinishModelBuffer(b, model);
}

}  // namespace

Status save_tern(const Graph& g, const std::string& path) {
  SegmentPlan plan;
  plan.of_value.assign(g.values.size(), -1);
  plan.of_packed.resize(g.values.size());
  uint64_t cursor = 0;
  auto add = [&](const Tensor* t) {
    plan.data.push_back(t);
    plan.offset.push_back(cursor);
    cursor = align_up(cursor + t->byte_size());
    return static_cast<int>(plan.data.size() - 1);
  };
  for (size_t i = 0; i < g.values.size(); ++i) {
    if (!g.values[i].constant) continue;
    if (g.values[i].constant->dtype() == DType::kString) {
      return unsupported("constant '", g.values[i].name,
                         "' is a string tensor; .tern segments hold fixed-width data only");
    }
    plan.of_value[i] = add(&*g.values[i].constant);
  }
  for (size_t i = 0; i < g.values.size(); ++i) {
    for (const PackedData& p : g.values[i].packed) {
      if (!g.values[i].constant) {
        return internal_error("value '", g.values[i].name, "' has packed data but no constant");
      }
      plan.of_packed[i].push_back(add(&p.data));
    }
  }
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
