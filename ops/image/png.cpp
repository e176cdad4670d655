// PNG through libpng: every colour type and bit depth, interlaced or not. 16-bit samples keep
// their high byte, palettes and low-bit gray expand to 8 bits, alpha is dropped, and gAMA/sRGB
// chunks are not applied (as OpenCV and PIL read them). Errors come back through our error
// function's longjmp; warnings are dropped rather than printed.
#include "ops/image/codec.h"

#if TERN_HAVE_PNG
#include <png.h>

#include <cstdio>
#include <cstring>
#endif

namespace tern::image {

#if TERN_HAVE_PNG
namespace {

struct Reader {
  const uint8_t* data;
  size_t size, pos;
  char message[256];
};

[[noreturn]] void on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof(r->message), "%s", msg);
  png_longjmp(png, 1);
}

void on_read(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "the data ends early (truncated)");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// The decode proper: after setjmp nothing with a destructor is created here (a longjmp would
// skip it); the pixels go to *out and the row pointers to *rows.
bool decode(png_structp png, png_infop info, Decoded* out, std::vector<png_bytep>* rows,
            Status* status) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  const int type = png_get_color_type(png, info);
  const bool gray = (type & PNG_COLOR_MASK_COLOR) == 0;
  png_set_strip_16(png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (gray) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *status = allocate(out, width, height, gray ? 1 : 3, "PNG");
  if (!status->is_ok()) return true;
  if (png_get_rowbytes(png, info) != static_cast<size_t>(out->width * out->channels)) {
    *status = internal_error("PNG: libpng gives rows of ", png_get_rowbytes(png, info),
                             " bytes for ", out->width, " pixels");
    return true;
  }
  rows->resize(height);
  for (png_uint_32 y = 0; y < height; ++y) {
    (*rows)[y] = out->pixels.data() + static_cast<size_t>(y) * png_get_rowbytes(png, info);
  }
  png_read_image(png, rows->data());
  return true;
}

}  // namespace

Expected<Decoded> decode_png(const uint8_t* data, size_t size) {
  Reader reader{data, size, 0, {}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_error,
                                           [](png_structp, png_const_charp) {});
  if (!png) return out_of_memory("PNG: cannot create a libpng reader");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return out_of_memory("PNG: cannot create a libpng reader");
  }
  png_set_read_fn(png, &reader, on_read);
  Decoded out;
  std::vector<png_bytep> rows;
  Status status;
  const bool finished = decode(png, info, &out, &rows, &status);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!finished) return invalid_argument("PNG: ", reader.message);
  if (!status.is_ok()) return status;
  return out;
}
#else
Expected<Decoded> decode_png(const uint8_t*, size_t) {
  return unsupported("PNG: this build has no PNG decoder (libpng; Debian: libpng-dev)");
}
#endif

}  // namespace tern::image
