// Per-channel weights as vectors of channels, the layout of the tiles that hold a vector of output
// channels a pixel (conv_stem, conv_depthwise).
#pragma once

#include <cstdint>
#include <string>

#include "core/weight_memory.h"

namespace tern {

// w ([C][taps], the model's constant `info`) as [ceil(C / lanes)][taps][lanes], channels past C
// zero, under `key`: the copy the model carries, the session's or the kernel's own
// (core/weight_memory.h's packed_copy).
inline Expected<PackedCopy> pack_channel_vectors(const TensorInfo& info, const Tensor& w,
                                                 int64_t channels, int64_t taps, int64_t lanes,
                                                 const std::string& key, WeightCache* cache) {
  const int64_t vectors = (channels + lanes - 1) / lanes, floats = vectors * taps * lanes;
  auto make = [&]() {
    return packed_blob(static_cast<size_t>(floats), key, [&](float* out) {
      const float* src = w.data<float>();
      for (int64_t v = 0; v < vectors; ++v) {
        for (int64_t t = 0; t < taps; ++t) {
          for (int64_t l = 0; l < lanes; ++l) {
            const int64_t c = v * lanes + l;
            out[(v * taps + t) * lanes + l] = c < channels ? src[c * taps + t] : 0.0f;
          }
        }
      }
    });
  };
  return packed_copy(info, key, static_cast<size_t>(floats) * sizeof(float), cache, make);
}

}  // namespace tern
