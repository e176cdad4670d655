#include "core/attribute.h"

namespace tern {

const char* attribute_kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::kFloat:
      return "float";
    case Attribute::Kind::kInt:
      return "int";
    case Attribute::Kind::kString:
      return "string";
    case Attribute::Kind::kTensor:
      return "tensor";
    case Attribute::Kind::kFloats:
      return "floats";
    case Attribute::Kind::kInts:
      return "ints";
    case Attribute::Kind::kStrings:
      return "strings";
    case Attribute::Kind::kGraph:
      return "graph";
    case Attribute::Kind::kGraphs:
      return "graphs";
    case Attribute::Kind::kType:
      return "type";
  }
  return "unknown";
}

const Attribute* Attributes::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

Status Attributes::wrong_kind(const std::string& name, Attribute::Kind want) const {
  return invalid_model("attribute '", name, "' is ", attribute_kind_name(map_.at(name).kind),
                       ", expected ", attribute_kind_name(want));
}

Expected<int64_t> Attributes::get_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind != Attribute::Kind::kInt) return wrong_kind(name, Attribute::Kind::kInt);
  return a->i;
}

Expected<float> Attributes::get_float(const std::string& name, float fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);  // lenient, as ONNX is
  if (a->kind != Attribute::Kind::kFloat) return wrong_kind(name, Attribute::Kind::kFloat);
  return a->f;
}

Expected<std::string> Attributes::get_string(const std::string& name,
                                             const std::string& fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind != Attribute::Kind::kString) return wrong_kind(name, Attribute::Kind::kString);
  return a->s;
}

Expected<std::vector<int64_t>> Attributes::get_ints(const std::string& name,
                                                    std::vector<int64_t> fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind != Attribute::Kind::kInts) return wrong_kind(name, Attribute::Kind::kInts);
  return a->ints;
}

Expected<std::vector<float>> Attributes::get_floats(const std::string& name,
                                                    std::vector<float> fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind != Attribute::Kind::kFloats) return wrong_kind(name, Attribute::Kind::kFloats);
  return a->floats;
}

Expected<std::vector<std::string>> Attributes::get_strings(
    const std::string& name, std::vector<std::string> fallback) const {
  const Attribute* a = find(name);
  if (!a) return fallback;
  if (a->kind != Attribute::Kind::kStrings) return wrong_kind(name, Attribute::Kind::kStrings);
  return a->strings;
}

Expected<const Graph*> Attributes::get_graph(const std::string& name) const {
  const Attribute* a = find(name);
  if (!a) return invalid_model("the required subgraph attribute '", name, "' is missing");
  if (a->kind != Attribute::Kind::kGraph || !a->g) return wrong_kind(name, Attribute::Kind::kGraph);
  return a->g.get();
}

}  // namespace tern
