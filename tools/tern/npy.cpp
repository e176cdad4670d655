#include "tools/tern/npy.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tern_cli {

namespace {

struct Descr {
  const char* code;
  tern_dtype dtype;
  size_t bytes;
  const char* label;
};

const Descr kDescrs[] = {
    {"<f4", TERN_FLOAT32, 4, "float32"}, {"<f8", TERN_FLOAT64, 8, "float64"},
    {"<f2", TERN_FLOAT16, 2, "float16"}, {"<i8", TERN_INT64, 8, "int64"},
    {"<i4", TERN_INT32, 4, "int32"},     {"<i2", TERN_INT16, 2, "int16"},
    {"|i1", TERN_INT8, 1, "int8"},       {"|u1", TERN_UINT8, 1, "uint8"},
    {"<u2", TERN_UINT16, 2, "uint16"},   {"<u4", TERN_UINT32, 4, "uint32"},
    {"<u8", TERN_UINT64, 8, "uint64"},   {"|b1", TERN_BOOL, 1, "bool"},
};

const Descr* by_dtype(tern_dtype d) {
  for (const auto& e : kDescrs) {
    if (e.dtype == d) return &e;
  }
  return nullptr;
}

// Value of 'key' in the header dict, as raw text up to the next top-level comma or brace.
std::string dict_value(const std::string& h, const std::string& key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t colon = h.find(':', k);
  if (colon == std::string::npos) return "";
  size_t i = colon + 1;
  while (i < h.size() && h[i] == ' ') ++i;
  size_t end = i;
  if (end < h.size() && h[end] == '(') {
    end = h.find(')', end);
    return end == std::string::npos ? "" : h.substr(i, end - i + 1);
  }
  while (end < h.size() && h[end] != ',' && h[end] != '}') ++end;
  return h.substr(i, end - i);
}

}  // namespace

size_t dtype_bytes(tern_dtype d) {
  const Descr* e = by_dtype(d);
  return e ? e->bytes : (d == TERN_BFLOAT16 ? 2 : 0);
}

const char* dtype_label(tern_dtype d) {
  const Descr* e = by_dtype(d);
  return e ? e->label : (d == TERN_BFLOAT16 ? "bfloat16" : "unknown");
}

std::string read_npy(const std::string& path, NpyArray* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "cannot open '" + path + "'";
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    return "'" + path + "' is not a .npy file";
  }
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint8_t b[2];
    if (!f.read(reinterpret_cast<char*>(b), 2)) return "truncated .npy header";
    header_len = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    uint8_t b[4];
    if (!f.read(reinterpret_cast<char*>(b), 4)) return "truncated .npy header";
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  } else {
    return "unsupported .npy version";
  }
  if (header_len > (1u << 20)) return ".npy header too large";
  std::string h(header_len, '\0');
  if (!f.read(h.data(), header_len)) return "truncated .npy header";
  // A dict literal, padded with spaces and ended by a newline.
  const size_t open = h.find_first_not_of(' ');
  const size_t close = h.find_last_not_of(" \n");
  if (open == std::string::npos || h[open] != '{' || h[close] != '}') {
    return "malformed .npy header (not a terminated dict): " + h.substr(0, 80);
  }
  std::string descr = dict_value(h, "descr");
  if (dict_value(h, "fortran_order").find("True") != std::string::npos) {
    return "Fortran-order .npy arrays are not supported";
  }
  const Descr* d = nullptr;
  for (const auto& e : kDescrs) {
    if (descr.find(e.code) != std::string::npos ||
        (e.code[0] == '|' && descr.find(std::string("<") + (e.code + 1)) != std::string::npos)) {
      d = &e;
      break;
    }
  }
  if (!d) return "unsupported .npy dtype " + descr;
  out->dtype = d->dtype;
  out->shape.clear();
  std::string shape = dict_value(h, "shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    return "malformed .npy header (no shape tuple): " + h.substr(0, 80);
  }
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  std::string item;
  uint64_t count = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (errno != 0 || end == item.c_str() ||
        std::string(end).find_first_not_of(' ') != std::string::npos) {
      return "bad .npy shape " + shape;
    }
    if (v < 0 || (v > 0 && count > (uint64_t{1} << 40) / static_cast<uint64_t>(v))) {
      return "bad .npy shape " + shape;
    }
    out->shape.push_back(v);
    count *= static_cast<uint64_t>(v);
  }
  // The data must be there before anything is allocated for it.
  const std::streampos data_start = f.tellg();
  f.seekg(0, std::ios::end);
  const uint64_t available = static_cast<uint64_t>(f.tellg() - data_start);
  f.seekg(data_start);
  if (count * d->bytes > available) {
    return "'" + path + "' holds " + std::to_string(available) + " bytes of data; its shape " +
           shape + " needs " + std::to_string(count * d->bytes);
  }
  out->data.resize(count * d->bytes);
  if (!f.read(reinterpret_cast<char*>(out->data.data()),
              static_cast<std::streamsize>(out->data.size()))) {
    return "'" + path + "' holds less data than its shape needs";
  }
  return "";
}

std::string write_npy(const std::string& path, tern_dtype dtype, const int64_t* shape, size_t rank,
                      const void* data, size_t bytes) {
  const Descr* d = by_dtype(dtype);
  if (!d) return std::string("cannot write dtype ") + dtype_label(dtype) + " as .npy";
  std::string shape_txt = "(";
  for (size_t i = 0; i < rank; ++i)
    shape_txt += std::to_string(shape[i]) + (rank == 1 ? "," : i + 1 < rank ? ", " : "");
  shape_txt += ")";
  std::string header = std::string("{'descr': '") + d->code +
                       "', 'fortran_order': False, 'shape': " + shape_txt + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) return "cannot write '" + path + "'";
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  char lb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(lb, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (bytes) f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  return f ? "" : "writing '" + path + "' failed";
}

}  // namespace tern_cli
