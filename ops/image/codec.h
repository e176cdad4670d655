// The image decoders behind ImageDecoder (ops/image_decoder.cpp): one per format, each in its own
// file over the library made for that format (libjpeg-turbo, libpng, libtiff, libwebp, OpenJPEG)
// or, for BMP, our own parser. A library the build did not find (TERN_HAVE_<FORMAT> unset)
// leaves its decoder answering UNSUPPORTED with the Debian package that provides it.
//
// Every decoder takes untrusted bytes: a truncated or corrupt stream is an INVALID_ARGUMENT
// naming the format and the reason, never a crash, an exit() or a message on stderr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace tern::image {

// 8-bit pixels, rows top-down, channels interleaved: 1 (gray) or 3 (R, G, B). Alpha is dropped
// and deeper samples are reduced to 8 bits (as OpenCV's imdecode does for IMREAD_COLOR).
struct Decoded {
  int64_t height = 0, width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
};

// The most pixels one image may have (16384 x 16384): a header may claim any size, and a decoder
// checks it before allocating.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

// Sizes `img` for width x height x channels after checking the dimensions against kMaxPixels;
// `format` names the format in the error.
Status allocate(Decoded* img, int64_t width, int64_t height, int channels, const char* format);

Expected<Decoded> decode_bmp(const uint8_t* data, size_t size);
Expected<Decoded> decode_jpeg(const uint8_t* data, size_t size);
Expected<Decoded> decode_png(const uint8_t* data, size_t size);
Expected<Decoded> decode_tiff(const uint8_t* data, size_t size);
Expected<Decoded> decode_webp(const uint8_t* data, size_t size);
// A JPEG 2000 codestream (`jp2` false) or a JP2 file.
Expected<Decoded> decode_jpeg2000(const uint8_t* data, size_t size, bool jp2);

}  // namespace tern::image
