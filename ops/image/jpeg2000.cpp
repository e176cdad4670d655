// JPEG 2000 through OpenJPEG, from a raw codestream (J2K) or a JP2 file, read from memory through
// an opj_stream with our read/skip/seek callbacks. Gray (with or without alpha) and RGB(A)
// images whose components share one size; samples of any precision are scaled to 8 bits.
// OpenJPEG's messages go to our callbacks, which keep the first error.
#include "ops/image/codec.h"

#if TERN_HAVE_OPENJPEG
#include <openjpeg.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#endif

namespace tern::image {

#if TERN_HAVE_OPENJPEG
namespace {

struct Memory {
  const uint8_t* data;
  size_t size, pos;
  char message[256];
};

OPJ_SIZE_T on_read(void* buf, OPJ_SIZE_T n, void* user) {
  auto* m = static_cast<Memory*>(user);
  if (m->pos >= m->size) return static_cast<OPJ_SIZE_T>(-1);  // end of stream
  const size_t count = std::min<size_t>(n, m->size - m->pos);
  std::memcpy(buf, m->data + m->pos, count);
  m->pos += count;
  return count;
}
OPJ_OFF_T on_skip(OPJ_OFF_T n, void* user) {
  auto* m = static_cast<Memory*>(user);
  if (n < 0) return -1;
  const size_t count = std::min<size_t>(static_cast<size_t>(n), m->size - m->pos);
  m->pos += count;
  return static_cast<OPJ_OFF_T>(count);
}
OPJ_BOOL on_seek(OPJ_OFF_T off, void* user) {
  auto* m = static_cast<Memory*>(user);
  if (off < 0 || static_cast<uint64_t>(off) > m->size) return OPJ_FALSE;
  m->pos = static_cast<size_t>(off);
  return OPJ_TRUE;
}
void on_error(const char* msg, void* user) {
  auto* m = static_cast<Memory*>(user);
  if (m->message[0] != '\0') return;
  std::snprintf(m->message, sizeof(m->message), "%s", msg);
  // OpenJPEG's messages end in a newline.
  const size_t len = std::strlen(m->message);
  if (len && m->message[len - 1] == '\n') m->message[len - 1] = '\0';
}
void on_quiet(const char*, void*) {}

// Releases whatever the decode made, however it ends.
struct Handles {
  opj_stream_t* stream = nullptr;
  opj_codec_t* codec = nullptr;
  opj_image_t* image = nullptr;
  ~Handles() {
    if (image) opj_image_destroy(image);
    if (codec) opj_destroy_codec(codec);
    if (stream) opj_stream_destroy(stream);
  }
};

// A component's sample as 8 bits: signed ones shifted to unsigned, deeper ones keep their high
// bits, shallower ones are scaled up to the full range.
uint8_t to_8bit(int32_t sample, const opj_image_comp_t& c) {
  const int prec = static_cast<int>(c.prec);
  const int64_t max = (int64_t{1} << prec) - 1;
  int64_t v = sample;
  if (c.sgnd) v += int64_t{1} << (prec - 1);
  v = std::clamp<int64_t>(v, 0, max);
  if (prec > 8) return static_cast<uint8_t>(v >> (prec - 8));
  if (prec < 8) return static_cast<uint8_t>((v * 255 + max / 2) / max);
  return static_cast<uint8_t>(v);
}

}  // namespace

Expected<Decoded> decode_jpeg2000(const uint8_t* data, size_t size, bool jp2) {
  Memory m{data, size, 0, {}};
  Handles h;
  h.stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, /*is_input=*/OPJ_TRUE);
  h.codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  if (!h.stream || !h.codec) return out_of_memory("JPEG 2000: cannot create an OpenJPEG decoder");
  opj_stream_set_user_data(h.stream, &m, nullptr);
  opj_stream_set_user_data_length(h.stream, size);
  opj_stream_set_read_function(h.stream, on_read);
  opj_stream_set_skip_function(h.stream, on_skip);
  opj_stream_set_seek_function(h.stream, on_seek);
  opj_set_error_handler(h.codec, on_error, &m);
  opj_set_warning_handler(h.codec, on_quiet, nullptr);
  opj_set_info_handler(h.codec, on_quiet, nullptr);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  auto failed = [&](const char* what) {
    return invalid_argument("JPEG 2000: ", m.message[0] ? m.message : what);
  };
  if (!opj_setup_decoder(h.codec, &params)) return failed("cannot set up the decoder");
  if (!opj_read_header(h.stream, h.codec, &h.image) || !h.image) {
    return failed("the header is truncated or corrupt");
  }
  const opj_image_t& img = *h.image;
  if (img.numcomps == 0) return failed("the image has no components");
  const int64_t width = img.comps[0].w, height = img.comps[0].h;
  if (width > 0 && height > 0 && width > kMaxPixels / height) {
    return invalid_argument("JPEG 2000: the image is ", width, "x", height, " pixels, over the ",
                            kMaxPixels, "-pixel limit");
  }
  if (!opj_decode(h.codec, h.stream, h.image) || !opj_end_decompress(h.codec, h.stream)) {
    return failed("the image data is truncated or corrupt");
  }
  if (img.comps[0].w != width || img.comps[0].h != height) {
    return failed("the decoded size differs from the header's");
  }
  if (img.color_space == OPJ_CLRSPC_SYCC || img.color_space == OPJ_CLRSPC_EYCC ||
      img.color_space == OPJ_CLRSPC_CMYK) {
    return unsupported("JPEG 2000: the ", img.color_space == OPJ_CLRSPC_CMYK ? "CMYK" : "YCC",
                       " colour space is not supported");
  }
  const int channels = img.numcomps >= 3 ? 3 : 1;
  for (int c = 0; c < channels; ++c) {
    const opj_image_comp_t& comp = img.comps[c];
    if (comp.w != img.comps[0].w || comp.h != img.comps[0].h || !comp.data) {
      return unsupported("JPEG 2000: components of different sizes (subsampled) are not supported");
    }
    if (comp.prec < 1 || comp.prec > 31) {
      return invalid_argument("JPEG 2000: component ", c, " has ", comp.prec, "-bit samples");
    }
  }
  Decoded out;
  TERN_RETURN_IF_ERROR(allocate(&out, width, height, channels, "JPEG 2000"));
  const int64_t n = width * height;
  for (int c = 0; c < channels; ++c) {
    const opj_image_comp_t& comp = img.comps[c];
    for (int64_t i = 0; i < n; ++i) {
      out.pixels[static_cast<size_t>(i * channels + c)] = to_8bit(comp.data[i], comp);
    }
  }
  return out;
}
#else
Expected<Decoded> decode_jpeg2000(const uint8_t*, size_t, bool) {
  return unsupported(
      "JPEG 2000: this build has no JPEG 2000 decoder (OpenJPEG; Debian: libopenjp2-7-dev)");
}
#endif

}  // namespace tern::image
