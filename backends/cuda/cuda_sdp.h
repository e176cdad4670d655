// What the CUDA attention kernels refuse, for tern_sdp_can_use and kernel choice.
#pragma once

#include <string>

#include "ops/attention.h"

namespace tern {

// backend: 0 MATH, 1 FLASH, 2 MEM_EFFICIENT, 3 CUDNN (tern_sdp_backend). "" when it can run.
std::string cuda_sdp_refusal(int backend, const ops::SdpCase& c);

}  // namespace tern
