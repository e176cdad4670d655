// What the image decoders share (ops/image/codec.h).
#include "ops/image/codec.h"

namespace tern::image {

Status allocate(Decoded* img, int64_t width, int64_t height, int channels, const char* format) {
  if (width <= 0 || height <= 0) {
    return invalid_argument(format, ": the image is ", width, "x", height, " pixels");
  }
  if (width > kMaxPixels / height) {
    return invalid_argument(format, ": the image is ", width, "x", height, " pixels, over the ",
                            kMaxPixels, "-pixel limit");
  }
  img->width = width;
  img->height = height;
  img->channels = channels;
  img->pixels.assign(static_cast<size_t>(width * height * channels), 0);
  return Status::ok();
}

}  // namespace tern::image
