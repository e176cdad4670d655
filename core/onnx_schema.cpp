#include "core/onnx_schema.h"

#include <algorithm>
#include <iterator>
#include <optional>

namespace tern::onnx_schema {

namespace {

// The generated rows, read only while compiling: the table kept in the library is kPacked below.
struct Row {
  const char* op;
  int64_t since;
  const char* attributes;  // space-separated
};

constexpr Row kRows[] = {
#include "core/onnx_attribute_table.inc"
};
constexpr size_t kRowCount = std::size(kRows);

constexpr size_t length(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}

constexpr bool same(const char* a, const char* b) {
  size_t i = 0;
  for (; a[i] != '\0' && a[i] == b[i]; ++i) {
  }
  return a[i] == b[i];
}

// A row's strings go into one blob (an op's versions share its name; a version with the
// attributes of the one before shares them) and rows hold offsets: no pointer to relocate per
// string at load (1,200 relocations, 29 kB of them in the aarch64 library) and half the bytes.
struct PackedRow {
  uint16_t op;          // offset of the name in the blob
  uint16_t attributes;  // offset of the space-separated names
  uint16_t since;
};

// Calls add(row, string, reuse) for each string of each row in order; reuse: the same text as the
// previous row's string of that kind.
template <class F>
constexpr void for_each_string(F&& add) {
  for (size_t i = 0; i < kRowCount; ++i) {
    add(i, kRows[i].op, i > 0 && same(kRows[i].op, kRows[i - 1].op), true);
    add(i, kRows[i].attributes, i > 0 && same(kRows[i].attributes, kRows[i - 1].attributes), false);
  }
}

constexpr size_t blob_size() {
  size_t n = 0;
  for_each_string([&](size_t, const char* s, bool reuse, bool) {
    if (!reuse) n += length(s) + 1;
  });
  return n;
}

struct PackedTable {
  char blob[blob_size()] = {};
  PackedRow rows[kRowCount] = {};
};
static_assert(blob_size() < 65536, "offsets are 16-bit");

constexpr PackedTable pack() {
  PackedTable t;
  size_t end = 0;
  uint16_t last_op = 0, last_attributes = 0;
  for_each_string([&](size_t i, const char* s, bool reuse, bool is_op) {
    uint16_t at = is_op ? last_op : last_attributes;
    if (!reuse) {
      at = static_cast<uint16_t>(end);
      for (size_t k = 0, n = length(s); k <= n; ++k) t.blob[end++] = s[k];
    }
    (is_op ? t.rows[i].op : t.rows[i].attributes) = at;
    (is_op ? last_op : last_attributes) = at;
    t.rows[i].since = static_cast<uint16_t>(kRows[i].since);
  });
  return t;
}

constexpr PackedTable kPacked = pack();

struct OpVersion {
  const char* op;
  int64_t since;
  const char* attributes;
};

// s == t, t nul-terminated. (Comparing a std::string with a pointer into the constant blob
// makes GCC's -Wstringop-overread misjudge the strlen.)
bool equals(const std::string& s, const char* t) {
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (t[i] != s[i]) return false;
  }
  return t[i] == '\0';
}

OpVersion version_of(const PackedRow& r) {
  return {kPacked.blob + r.op, r.since, kPacked.blob + r.attributes};
}

// The table's row of `op` in force at `opset`, if any.
std::optional<OpVersion> row_at(const std::string& op, int64_t opset) {
  std::optional<OpVersion> best;
  for (const PackedRow& r : kPacked.rows) {
    const OpVersion v = version_of(r);
    if (equals(op, v.op) && v.since <= opset && (!best || v.since > best->since)) best = v;
  }
  return best;
}

void add_names(const char* list, std::vector<std::string>* out) {
  for (const char* p = list; *p != '\0';) {
    const char* end = p;
    while (*end != '\0' && *end != ' ') ++end;
    std::string name(p, end);
    if (!name.empty() && std::find(out->begin(), out->end(), name) == out->end()) {
      out->push_back(std::move(name));
    }
    p = *end == ' ' ? end + 1 : end;
  }
}

}  // namespace

int64_t version_at(const std::string& op, int64_t opset) {
  const std::optional<OpVersion> v = row_at(op, opset);
  return v ? v->since : 0;
}

std::vector<std::string> attributes_at(const std::string& op, int64_t opset) {
  std::vector<std::string> out;
  if (const std::optional<OpVersion> v = row_at(op, opset)) add_names(v->attributes, &out);
  return out;
}

std::vector<std::string> attributes_since(const std::string& op, int64_t from_opset) {
  const int64_t first = std::max<int64_t>(version_at(op, from_opset), 1);
  std::vector<std::string> out;
  for (const PackedRow& r : kPacked.rows) {
    const OpVersion v = version_of(r);
    if (equals(op, v.op) && v.since >= first) add_names(v.attributes, &out);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_onnx_op(const std::string& op) {
  return std::any_of(std::begin(kPacked.rows), std::end(kPacked.rows),
                     [&](const PackedRow& r) { return equals(op, version_of(r).op); });
}

}  // namespace tern::onnx_schema
