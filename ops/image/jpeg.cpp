// JPEG through libjpeg(-turbo): baseline, progressive, grayscale, RGB, YCbCr and Adobe CMYK/YCCK.
// libjpeg's default error handler calls exit(): ours formats the message and longjmps back here.
// Warnings that mean the pixels were made up (data cut short, corrupt entropy data) are errors
// too: libjpeg would fill the rest of the image with gray and call it decoded.
#include "ops/image/codec.h"

#if TERN_HAVE_JPEG
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t first

#include <jerror.h>
#include <jpeglib.h>
#endif

namespace tern::image {

#if TERN_HAVE_JPEG
namespace {

// A crafted progressive JPEG can hold thousands of scans, each a pass over the whole image.
constexpr int kMaxScans = 1000;

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool damaged;  // a warning said the data was truncated or corrupt
};

ErrorManager* manager(j_common_ptr cinfo) {
  return reinterpret_cast<ErrorManager*>(cinfo->err);
}

[[noreturn]] void on_error(j_common_ptr cinfo) {
  ErrorManager* err = manager(cinfo);
  cinfo->err->format_message(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace output
  ErrorManager* err = manager(cinfo);
  switch (cinfo->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_MUST_RESYNC:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_NOT_SEQUENTIAL:
      if (!err->damaged) cinfo->err->format_message(cinfo, err->message);
      err->damaged = true;
      break;
    default:  // benign: extra bytes between markers, an unknown JFIF version, a bad ICC profile
      break;
  }
}

void on_progress(j_common_ptr cinfo) {
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    ErrorManager* err = manager(cinfo);
    std::snprintf(err->message, sizeof(err->message), "more than %d scans", kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

// Adobe CMYK is stored inverted (255 = no ink), so R = C * K / 255 (as OpenCV converts).
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t n) {
  for (int64_t i = 0; i < n; ++i, cmyk += 4, rgb += 3) {
    const int k = cmyk[3];
    for (int c = 0; c < 3; ++c) rgb[c] = static_cast<uint8_t>(cmyk[c] * k / 255);
  }
}

// The decode proper. Nothing here that has a destructor may be alive across a libjpeg call (a
// longjmp would skip it): the results go to *out and *status, the scratch row to *cmyk_row.
bool decode(j_decompress_ptr cinfo, ErrorManager* err, const uint8_t* data, size_t size,
            Decoded* out, std::vector<uint8_t>* cmyk_row, Status* status) {
  if (setjmp(err->jump)) return false;
  jpeg_create_decompress(cinfo);
  cinfo->progress = &err->progress;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  const bool gray = cinfo->jpeg_color_space == JCS_GRAYSCALE;
  cinfo->out_color_space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_RGB;
  *status = allocate(out, cinfo->image_width, cinfo->image_height, gray ? 1 : 3, "JPEG");
  if (!status->is_ok()) return true;
  if (cmyk) cmyk_row->resize(static_cast<size_t>(cinfo->image_width) * 4);
  jpeg_start_decompress(cinfo);
  const size_t stride = static_cast<size_t>(out->width) * static_cast<size_t>(out->channels);
  while (cinfo->output_scanline < cinfo->output_height && !err->damaged) {
    uint8_t* dst = out->pixels.data() + cinfo->output_scanline * stride;
    JSAMPROW row = cmyk ? cmyk_row->data() : dst;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) break;
    if (cmyk) cmyk_to_rgb(cmyk_row->data(), dst, out->width);
  }
  if (!err->damaged) jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

Expected<Decoded> decode_jpeg(const uint8_t* data, size_t size) {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.emit_message = on_message;
  err.pub.output_message = [](j_common_ptr) {};
  err.progress.progress_monitor = on_progress;
  Decoded out;
  std::vector<uint8_t> cmyk_row;
  Status status;
  const bool finished = decode(&cinfo, &err, data, size, &out, &cmyk_row, &status);
  jpeg_destroy_decompress(&cinfo);
  if (!finished) return invalid_argument("JPEG: ", err.message);
  if (!status.is_ok()) return status;
  if (err.damaged) return invalid_argument("JPEG: ", err.message);
  return out;
}
#else
Expected<Decoded> decode_jpeg(const uint8_t*, size_t) {
  return unsupported("JPEG: this build has no JPEG decoder (libjpeg; Debian: libjpeg-dev)");
}
#endif

}  // namespace tern::image
