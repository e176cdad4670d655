// TIFF through libtiff, read from memory (TIFFClientOpen over our buffer): the first page, any
// photometric interpretation, compression and sample layout libtiff's RGBA interface handles.
// Gray pages stay one channel. libtiff reports errors through handlers of the open handle
// (libtiff >= 4.5) that keep the first message; nothing is printed.
#include "ops/image/codec.h"

#if TERN_HAVE_TIFF
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#endif

namespace tern::image {

#if TERN_HAVE_TIFF
namespace {

struct Memory {
  const uint8_t* data;
  toff_t size, pos;
  char message[256];
};

Memory* memory(thandle_t h) {
  return static_cast<Memory*>(h);
}

tmsize_t on_read(thandle_t h, void* buf, tmsize_t n) {
  Memory* m = memory(h);
  if (n <= 0 || m->pos >= m->size) return 0;
  const toff_t count = std::min<toff_t>(static_cast<toff_t>(n), m->size - m->pos);
  std::memcpy(buf, m->data + m->pos, count);
  m->pos += count;
  return static_cast<tmsize_t>(count);
}
tmsize_t on_write(thandle_t, void*, tmsize_t) {
  return 0;
}
toff_t on_seek(thandle_t h, toff_t off, int whence) {
  Memory* m = memory(h);
  const toff_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->size : 0;
  if (off > ~toff_t{0} - base) return static_cast<toff_t>(-1);
  m->pos = base + off;  // past the end is allowed: reads there return nothing
  return m->pos;
}
int on_close(thandle_t) {
  return 0;
}
toff_t on_size(thandle_t h) {
  return memory(h)->size;
}
int on_map(thandle_t, void**, toff_t*) {
  return 0;
}
void on_unmap(thandle_t, void*, toff_t) {}

#if TIFFLIB_VERSION >= 20221213
int on_error(TIFF*, void* user, const char*, const char* fmt, va_list ap) {
  Memory* m = static_cast<Memory*>(user);
  if (m->message[0] == '\0') std::vsnprintf(m->message, sizeof(m->message), fmt, ap);
  return 1;  // handled: libtiff prints nothing
}
int on_warning(TIFF*, void*, const char*, const char*, va_list) {
  return 1;
}
#endif

TIFF* open(Memory* m) {
#if TIFFLIB_VERSION >= 20221213
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  if (!opts) return nullptr;
  TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, m);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, m);
  // One allocation at most as large as the biggest image we decode (RGBA).
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts, static_cast<tmsize_t>(kMaxPixels * 4));
  TIFF* tif = TIFFClientOpenExt("memory", "rm", m, on_read, on_write, on_seek, on_close, on_size,
                                on_map, on_unmap, opts);
  TIFFOpenOptionsFree(opts);
  return tif;
#else
  // (Older libtiff has only process-wide handlers: its messages go to stderr.)
  return TIFFClientOpen("memory", "rm", m, on_read, on_write, on_seek, on_close, on_size, on_map,
                        on_unmap);
#endif
}

Status failure(const Memory& m, const char* what) {
  return invalid_argument("TIFF: ", m.message[0] ? m.message : what);
}

}  // namespace

Expected<Decoded> decode_tiff(const uint8_t* data, size_t size) {
  Memory m{data, static_cast<toff_t>(size), 0, {}};
  TIFF* tif = open(&m);
  if (!tif) return failure(m, "not a readable TIFF stream");
  struct Closer {
    TIFF* t;
    ~Closer() { TIFFClose(t); }
  } closer{tif};
  uint32_t width = 0, height = 0;
  uint16_t photometric = PHOTOMETRIC_RGB, samples = 1, extra = 0;
  uint16_t* extra_types = nullptr;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) ||
      !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height)) {
    return failure(m, "the image has no width or height");
  }
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &extra, &extra_types);
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  char why[1024] = "";
  if (!TIFFRGBAImageOK(tif, why)) return unsupported("TIFF: ", why);
  const bool gray =
      (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) &&
      samples - extra == 1;
  Decoded img;
  TERN_RETURN_IF_ERROR(allocate(&img, width, height, gray ? 1 : 3, "TIFF"));
  std::vector<uint32_t> rgba(static_cast<size_t>(width) * height);
  if (!TIFFReadRGBAImageOriented(tif, width, height, rgba.data(), ORIENTATION_TOPLEFT,
                                 /*stop_on_error=*/1)) {
    return failure(m, "the image data is truncated or corrupt");
  }
  if (m.message[0]) return failure(m, "");
  uint8_t* dst = img.pixels.data();
  for (const uint32_t px : rgba) {
    if (gray) {
      *dst++ = static_cast<uint8_t>(TIFFGetR(px));
    } else {
      *dst++ = static_cast<uint8_t>(TIFFGetR(px));
      *dst++ = static_cast<uint8_t>(TIFFGetG(px));
      *dst++ = static_cast<uint8_t>(TIFFGetB(px));
    }
  }
  return img;
}
#else
Expected<Decoded> decode_tiff(const uint8_t*, size_t) {
  return unsupported("TIFF: this build has no TIFF decoder (libtiff; Debian: libtiff-dev)");
}
#endif

}  // namespace tern::image
