// WebP through libwebp: lossy and lossless still images; alpha is dropped. Animated files are
// refused (ImageDecoder gives one image).
#include "ops/image/codec.h"

#if TERN_HAVE_WEBP
#include <webp/decode.h>
#endif

namespace tern::image {

#if TERN_HAVE_WEBP
namespace {

const char* status_text(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "the bitstream is corrupt";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "an unsupported feature";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "the data ends early (truncated)";
    default:
      return "decoding failed";
  }
}

}  // namespace

Expected<Decoded> decode_webp(const uint8_t* data, size_t size) {
  WebPBitstreamFeatures f;
  const VP8StatusCode st = WebPGetFeatures(data, size, &f);
  if (st != VP8_STATUS_OK) return invalid_argument("WebP: ", status_text(st));
  if (f.has_animation) return unsupported("WebP: animated images are not supported");
  Decoded img;
  TERN_RETURN_IF_ERROR(allocate(&img, f.width, f.height, 3, "WebP"));
  if (!WebPDecodeRGBInto(data, size, img.pixels.data(), img.pixels.size(),
                         static_cast<int>(img.width * 3))) {
    return invalid_argument("WebP: the image data is truncated or corrupt");
  }
  return img;
}
#else
Expected<Decoded> decode_webp(const uint8_t*, size_t) {
  return unsupported("WebP: this build has no WebP decoder (libwebp; Debian: libwebp-dev)");
}
#endif

}  // namespace tern::image
