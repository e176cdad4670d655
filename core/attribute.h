// Typed node attributes. Kind values match ONNX's AttributeProto.AttributeType.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tern {

struct Graph;

struct Attribute {
  enum class Kind : uint8_t {
    kFloat = 1,
    kInt = 2,
    kString = 3,
    kTensor = 4,
    kGraph = 5,  // a subgraph: If's branches, Loop's and Scan's body
    kFloats = 6,
    kInts = 7,
    kStrings = 8,
    kGraphs = 10,
    kType = 13,  // a value type (Optional's `type`): ints holds {dtype, elem, seq_elem}
  };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  Tensor t;
  // kGraph: g; kGraphs: graphs. Immutable once built, so copies of a node share them.
  std::shared_ptr<const Graph> g;
  std::vector<std::shared_ptr<const Graph>> graphs;

  // An int / ints / float attribute (for passes that rewrite nodes).
  static Attribute of_float(float v) {
    Attribute a;
    a.kind = Kind::kFloat, a.f = v;
    return a;
  }
  static Attribute of_int(int64_t v) {
    Attribute a;
    a.i = v;
    return a;
  }
  static Attribute of_ints(std::vector<int64_t> v) {
    Attribute a;
    a.kind = Kind::kInts, a.ints = std::move(v);
    return a;
  }
};

const char* attribute_kind_name(Attribute::Kind k);

// Attribute lookup with typed accessors; a present attribute of the wrong kind is an error that
// names the attribute.
class Attributes {
 public:
  void set(std::string name, Attribute a) { map_[std::move(name)] = std::move(a); }
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* find(const std::string& name) const;
  const std::map<std::string, Attribute>& all() const { return map_; }

  Expected<int64_t> get_int(const std::string& name, int64_t fallback) const;
  Expected<float> get_float(const std::string& name, float fallback) const;
  Expected<std::string> get_string(const std::string& name, const std::string& fallback) const;
  Expected<std::vector<int64_t>> get_ints(const std::string& name,
                                          std::vector<int64_t> fallback = {}) const;
  Expected<std::vector<float>> get_floats(const std::string& name,
                                          std::vector<float> fallback = {}) const;
  Expected<std::vector<std::string>> get_strings(const std::string& name,
                                                 std::vector<std::string> fallback = {}) const;
  // A required subgraph attribute: INVALID_MODEL when it is absent or of another kind.
  Expected<const Graph*> get_graph(const std::string& name) const;

 private:
  Status wrong_kind(const std::string& name, Attribute::Kind want) const;
  std::map<std::string, Attribute> map_;
};

}  // namespace tern
