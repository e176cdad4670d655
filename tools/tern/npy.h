// Minimal NumPy .npy reading and writing (little-endian, C order) for the CLI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "c_api.h"

namespace tern_cli {

struct NpyArray {
  tern_dtype dtype = TERN_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Returns "" on success, else what is wrong.
std::string read_npy(const std::string& path, NpyArray* out);
std::string write_npy(const std::string& path, tern_dtype dtype, const int64_t* shape, size_t rank,
                      const void* data, size_t bytes);
size_t dtype_bytes(tern_dtype dtype);
const char* dtype_label(tern_dtype dtype);

}  // namespace tern_cli
