// Where a tensor's bytes live. Host memory is the default; a device backend (CUDA, Vulkan) owns
// memory the host cannot dereference, and tensors in it carry that backend's Device.
#pragma once

#include <cstdint>
#include <string>

namespace tern {

enum class DeviceType : uint8_t {
  kCpu = 0,
  kCuda = 1,
  kVulkan = 2,
  // Host memory that the engine treats as a separate device: the partitioner's tests run the
  // device paths (copies, device arenas, captured segments) with it on machines without a GPU.
  kSimulated = 3,
};

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  bool is_host() const { return type == DeviceType::kCpu; }
  bool operator==(const Device& o) const {
    return type == o.type && (is_host() || index == o.index);
  }
  bool operator!=(const Device& o) const { return !(*this == o); }
  // "cpu", "cuda:0", "vulkan:1", "simulated:0"
  std::string name() const {
    static const char* kinds[] = {"cpu", "cuda", "vulkan", "simulated"};
    if (is_host()) return "cpu";
    return std::string(kinds[static_cast<int>(type)]) + ":" + std::to_string(index);
  }
};

}  // namespace tern
