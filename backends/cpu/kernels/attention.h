// The CPU scaled-dot-product attention kernels (MATH and FLASH) and what they refuse.
#pragma once

#include <string>

#include "ops/attention.h"

namespace tern {

enum class CpuSdp { kMath = 0, kFlash = 1 };

// "" when the kernel can run the case; else why not (for tern_sdp_can_use and plan errors).
std::string cpu_sdp_refusal(CpuSdp kernel, const ops::SdpCase& c);

}  // namespace tern
