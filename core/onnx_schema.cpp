#include "core/onnx_schema.h"

#include <algorithm>
#include <sstream>

namespace tern::onnx_schema {

namespace {

struct OpVersion {
  const char* op;
  int64_t since;
  const char* attributes;  // space-separated
};

constexpr OpVersion kTable[] = {
#include "core/onnx_attribute_table.inc"
};

// The table's row of `op` in force at `opset`, or null.
const OpVersion* row_at(const std::string& op, int64_t opset) {
  const OpVersion* best = nullptr;
  for (const OpVersion& v : kTable) {
    if (op == v.op && v.since <= opset && (!best || v.since > best->since)) best = &v;
  }
  return best;
}

void add_names(const char* list, std::vector<std::string>* out) {
  std::istringstream in(list);
  for (std::string name; in >> name;) {
    if (std::find(out->begin(), out->end(), name) == out->end()) out->push_back(name);
  }
}

}  // namespace

int64_t version_at(const std::string& op, int64_t opset) {
  const OpVersion* v = row_at(op, opset);
  return v ? v->since : 0;
}

std::vector<std::string> attributes_at(const std::string& op, int64_t opset) {
  std::vector<std::string> out;
  if (const OpVersion* v = row_at(op, opset)) add_names(v->attributes, &out);
  return out;
}

std::vector<std::string> attributes_since(const std::string& op, int64_t from_opset) {
  const int64_t first = std::max<int64_t>(version_at(op, from_opset), 1);
  std::vector<std::string> out;
  for (const OpVersion& v : kTable) {
    if (op == v.op && v.since >= first) add_names(v.attributes, &out);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_onnx_op(const std::string& op) {
  return std::any_of(std::begin(kTable), std::end(kTable),
                     [&](const OpVersion& v) { return op == v.op; });
}

}  // namespace tern::onnx_schema
