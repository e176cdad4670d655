// The SPIR-V of every shader variant listed in shaders/variants.txt, compiled by glslc at build
// time and embedded by cmake/TernEmbedSpirv.cmake.
#pragma once

#include <cstddef>
#include <string_view>

namespace tern::vk {

struct ShaderBinary {
  const char* name;   // "binary_f32"
  int bindings;       // storage buffers, bound 0..bindings-1
  const char* needs;  // "-", "fp16_storage" or "fp16_arithmetic"
  const unsigned char* code;
  size_t size;
};

const ShaderBinary* find_shader(std::string_view name);  // null for an unknown name

}  // namespace tern::vk
