// ImageDecoder: images encoded here, in the test, by the libraries made for each format (libjpeg,
// libpng, libtiff, libwebp, OpenJPEG) or by hand (BMP), decoded through a session and compared
// with the pixels that went in (exactly for the lossless formats, within a bound for JPEG);
// RGB/BGR/Grayscale; rejections of bad inputs with their exact status; and every prefix of each
// valid stream, plus random corruptions (seed printed), decoded without a crash. A format whose
// library this build lacks must answer UNSUPPORTED naming its Debian package.
#include <doctest/doctest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "graph_builder.h"
#include "ops/image/codec.h"
#include "test_util.h"

#if TERN_HAVE_JPEG
#include <jpeglib.h>
#endif
#if TERN_HAVE_PNG
#include <png.h>
#endif
#if TERN_HAVE_TIFF
#include <tiffio.h>
#endif
#if TERN_HAVE_WEBP
#include <webp/decode.h>
#include <webp/encode.h>
#endif
#if TERN_HAVE_OPENJPEG
#include <openjpeg.h>
#endif

using namespace tern;
using namespace tern_test;

namespace {

using Bytes = std::vector<uint8_t>;

// Pixels, rows top-down, channels interleaved (1 or 3).
struct Pixels {
  int64_t h = 0, w = 0;
  int c = 3;
  Bytes px;
  uint8_t at(int64_t y, int64_t x, int ch) const {
    return px[static_cast<size_t>((y * w + x) * c + ch)];
  }
};

Pixels random_pixels(int64_t h, int64_t w, int c, std::mt19937& rng) {
  Pixels p{h, w, c, Bytes(static_cast<size_t>(h * w * c))};
  for (auto& v : p.px) v = static_cast<uint8_t>(rng());
  return p;
}

// Smooth colour gradients, which a lossy codec keeps within a few levels.
[[maybe_unused]] Pixels smooth_pixels(int64_t h, int64_t w, int c) {
  Pixels p{h, w, c, Bytes(static_cast<size_t>(h * w * c))};
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int ch = 0; ch < c; ++ch) {
        const double v = 128 + 100 * std::sin(0.11 * x * (ch + 1) + 0.07 * y) * std::cos(0.05 * y);
        p.px[static_cast<size_t>((y * w + x) * c + ch)] = static_cast<uint8_t>(std::lround(v));
      }
    }
  }
  return p;
}

Tensor bytes_tensor(const Bytes& b) {
  Tensor t = Tensor::allocate(DType::kUInt8, {static_cast<int64_t>(b.size())}).value();
  if (!b.empty()) std::memcpy(t.data<uint8_t>(), b.data(), b.size());
  return t;
}

Expected<Tensor> run_decoder(const Tensor& in, const std::string& format = "") {
  SingleOp op{"ImageDecoder", {}, {in}, {}};
  op.opset = 20;
  if (!format.empty()) op.attrs.set("pixel_format", attr_string(format));
  TERN_ASSIGN_OR_RETURN(std::vector<Tensor> out, op.run());
  return out[0];
}
Expected<Tensor> decode(const Bytes& b, const std::string& format = "") {
  return run_decoder(bytes_tensor(b), format);
}

// ITU-R 601 luma, rounded, computed in double (the decoder uses 16-bit fixed point).
int luma(int r, int g, int b) {
  return static_cast<int>(std::lround(0.299 * r + 0.587 * g + 0.114 * b));
}

// The decoded tensor against the expected pixels in every pixel format: RGB within `tol` of
// `want` (gray expected pixels replicate to three channels), BGR the reverse of the decoded
// RGB, Grayscale the luma of the decoded RGB (within 1: fixed point against double).
void check_decodes(const Bytes& stream, const Pixels& want, int tol, const std::string& what) {
  CAPTURE(what);
  Expected<Tensor> rgb = decode(stream);
  REQUIRE_MESSAGE(rgb.has_value(), rgb.status().message());
  REQUIRE(rgb->shape() == Shape{want.h, want.w, 3});
  const uint8_t* r = rgb->data<uint8_t>();
  int worst = 0;
  for (int64_t y = 0; y < want.h; ++y) {
    for (int64_t x = 0; x < want.w; ++x) {
      for (int ch = 0; ch < 3; ++ch) {
        const int diff =
            std::abs(r[(y * want.w + x) * 3 + ch] - want.at(y, x, want.c == 1 ? 0 : ch));
        worst = std::max(worst, diff);
      }
    }
  }
  CHECK(worst <= tol);
  Expected<Tensor> bgr = decode(stream, "BGR");
  REQUIRE_MESSAGE(bgr.has_value(), bgr.status().message());
  REQUIRE(bgr->shape() == Shape{want.h, want.w, 3});
  Expected<Tensor> gray = decode(stream, "Grayscale");
  REQUIRE_MESSAGE(gray.has_value(), gray.status().message());
  REQUIRE(gray->shape() == Shape{want.h, want.w, 1});
  const uint8_t* b = bgr->data<uint8_t>();
  const uint8_t* g = gray->data<uint8_t>();
  int bgr_bad = 0, gray_bad = 0;
  for (int64_t i = 0; i < want.h * want.w; ++i) {
    bgr_bad += b[3 * i] != r[3 * i + 2] || b[3 * i + 1] != r[3 * i + 1] || b[3 * i + 2] != r[3 * i];
    const int l = want.c == 1 ? r[3 * i] : luma(r[3 * i], r[3 * i + 1], r[3 * i + 2]);
    gray_bad += std::abs(g[i] - l) > (want.c == 1 ? 0 : 1);
  }
  CHECK(bgr_bad == 0);
  CHECK(gray_bad == 0);
}

// Every prefix of `stream`, then `rounds` copies with random bytes changed, through `decoder`:
// each either decodes or fails with INVALID_ARGUMENT/UNSUPPORTED; none crashes.
void check_no_crash(const Bytes& stream,
                    const std::function<Expected<image::Decoded>(const uint8_t*, size_t)>& decoder,
                    const char* what, int rounds = 200) {
  CAPTURE(what);
  int bad = 0;
  auto ok_outcome = [](const Expected<image::Decoded>& r) {
    if (r.has_value())
      return r->pixels.size() == static_cast<size_t>(r->height * r->width * r->channels);
    const Code c = r.status().code();
    return c == Code::kInvalidArgument || c == Code::kUnsupported;
  };
  for (size_t n = 0; n < stream.size(); ++n) {
    const Bytes prefix(stream.begin(), stream.begin() + static_cast<ptrdiff_t>(n));
    bad += !ok_outcome(decoder(prefix.data(), prefix.size()));
  }
  const uint32_t seed = std::random_device{}();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < rounds; ++i) {
    Bytes b = stream;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    bad += !ok_outcome(decoder(b.data(), b.size()));
  }
  CHECK(bad == 0);
}

// ---- BMP, written by hand -----------------------------------------------------------------------

void put16(Bytes& b, size_t at, uint32_t v) {
  b[at] = static_cast<uint8_t>(v);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}
void put32(Bytes& b, size_t at, uint32_t v) {
  put16(b, at, v & 0xFFFF);
  put16(b, at + 2, v >> 16);
}

struct BmpSpec {
  int bpp = 24;
  bool top_down = false;
  bool core_header = false;                     // the 12-byte OS/2 header
  std::vector<uint32_t> masks;                  // BI_BITFIELDS (R, G, B) when set
  std::vector<std::array<uint8_t, 3>> palette;  // RGB, for bpp <= 8
};

// A BMP of `p` (RGB) or, for palettised specs, of `indices` into the palette; `expected` receives
// the RGB pixels a reader must see.
Bytes write_bmp(const BmpSpec& s, const Pixels& p, const Bytes& indices, Pixels* expected) {
  const size_t header = s.core_header ? 12 : 40;
  const size_t masks = s.masks.empty() ? 0 : 12;
  const size_t entry = s.core_header ? 3 : 4;
  const size_t offset = 14 + header + masks + s.palette.size() * entry;
  const size_t stride = static_cast<size_t>((p.w * s.bpp + 31) / 32 * 4);
  Bytes b(offset + stride * static_cast<size_t>(p.h), 0);
  b[0] = 'B';
  b[1] = 'M';
  put32(b, 2, static_cast<uint32_t>(b.size()));
  put32(b, 10, static_cast<uint32_t>(offset));
  put32(b, 14, static_cast<uint32_t>(header));
  if (s.core_header) {
    put16(b, 18, static_cast<uint32_t>(p.w));
    put16(b, 20, static_cast<uint32_t>(p.h));
    put16(b, 22, 1);
    put16(b, 24, static_cast<uint32_t>(s.bpp));
  } else {
    put32(b, 18, static_cast<uint32_t>(p.w));
    put32(b, 22, static_cast<uint32_t>(s.top_down ? -p.h : p.h));
    put16(b, 26, 1);
    put16(b, 28, static_cast<uint32_t>(s.bpp));
    put32(b, 30, s.masks.empty() ? 0 : 3);
    put32(b, 46, static_cast<uint32_t>(s.palette.size()));
    for (size_t i = 0; i < s.masks.size(); ++i) put32(b, 54 + 4 * i, s.masks[i]);
  }
  for (size_t i = 0; i < s.palette.size(); ++i) {
    const size_t at = 14 + header + masks + i * entry;
    b[at] = s.palette[i][2];
    b[at + 1] = s.palette[i][1];
    b[at + 2] = s.palette[i][0];
  }
  *expected = Pixels{p.h, p.w, 3, Bytes(static_cast<size_t>(p.h * p.w * 3))};
  // A mask's field scaled to 8 bits: round(v * 255 / max), or the top 8 bits of a wider field.
  auto field = [](uint32_t px, uint32_t mask) {
    int shift = 0;
    while (!((mask >> shift) & 1)) ++shift;
    const uint32_t max = mask >> shift;
    const uint32_t v = (px & mask) >> shift;
    int bits = 0;
    while (bits < 32 && ((max >> bits) & 1)) ++bits;
    if (bits >= 8) return static_cast<uint8_t>(v >> (bits - 8));
    return static_cast<uint8_t>(std::lround(v * 255.0 / max));
  };
  for (int64_t y = 0; y < p.h; ++y) {
    uint8_t* row = b.data() + offset + stride * static_cast<size_t>(s.top_down ? y : p.h - 1 - y);
    for (int64_t x = 0; x < p.w; ++x) {
      uint8_t* want = &expected->px[static_cast<size_t>((y * p.w + x) * 3)];
      if (s.bpp <= 8) {
        const uint8_t idx = indices[static_cast<size_t>(y * p.w + x)];
        const int64_t bit = x * s.bpp;
        row[bit / 8] |= static_cast<uint8_t>(idx << (8 - s.bpp - bit % 8));
        std::copy(s.palette[idx].begin(), s.palette[idx].end(), want);
      } else if (s.bpp == 24) {
        for (int ch = 0; ch < 3; ++ch)
          row[x * 3 + ch] = p.at(y, x, 2 - ch), want[ch] = p.at(y, x, ch);
      } else {
        // Pixels packed with the masks (or the BI_RGB defaults) from the top bits of each value.
        std::vector<uint32_t> m = s.masks;
        if (m.empty())
          m = s.bpp == 16 ? std::vector<uint32_t>{0x7C00, 0x03E0, 0x001F}
                          : std::vector<uint32_t>{0xFF0000, 0xFF00, 0xFF};
        uint32_t px = 0;
        for (int ch = 0; ch < 3; ++ch) {
          int shift = 0, bits = 0;
          while (!((m[static_cast<size_t>(ch)] >> shift) & 1)) ++shift;
          while (shift + bits < 32 && ((m[static_cast<size_t>(ch)] >> (shift + bits)) & 1)) ++bits;
          px |= (static_cast<uint32_t>(p.at(y, x, ch)) >> std::max(0, 8 - bits)) << shift;
        }
        for (int ch = 0; ch < 3; ++ch) want[ch] = field(px, m[static_cast<size_t>(ch)]);
        if (s.bpp == 16) {
          put16(b, static_cast<size_t>(row - b.data() + x * 2), px);
        } else {
          put32(b, static_cast<size_t>(row - b.data() + x * 4), px);
        }
      }
    }
  }
  return b;
}

Bytes any_bmp() {
  std::mt19937 rng(1);
  Pixels want;
  return write_bmp({}, random_pixels(7, 5, 3, rng), {}, &want);
}

// ---- Encoders over the libraries ---------------------------------------------------------------

#if TERN_HAVE_JPEG
// quality 98, no chroma subsampling; gray when p.c == 1.
Bytes write_jpeg(const Pixels& p, bool progressive = false) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(p.w);
  c.image_height = static_cast<JDIMENSION>(p.h);
  c.input_components = p.c;
  c.in_color_space = p.c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 98, TRUE);
  for (int i = 0; i < c.num_components; ++i)
    c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&p.px[static_cast<size_t>(c.next_scanline * p.w * p.c)]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(buf, buf + size);
  std::free(buf);
  return out;
}
#endif

#if TERN_HAVE_PNG
void png_append(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

// `rows` already in the PNG's own sample layout (16-bit big-endian).
Bytes write_png(int64_t w, int64_t h, int type, int depth, bool interlace,
                const std::vector<Bytes>& rows, const std::vector<png_color>& palette = {}) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return {};
  }
  png_set_write_fn(png, &out, png_append, nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), depth, type,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  png_write_info(png, info);
  std::vector<png_bytep> ptrs;
  for (const Bytes& r : rows) ptrs.push_back(const_cast<png_bytep>(r.data()));
  png_write_image(png, ptrs.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

Bytes rgb_png(const Pixels& p) {
  std::vector<Bytes> rows;
  for (int64_t y = 0; y < p.h; ++y) {
    rows.emplace_back(p.px.begin() + y * p.w * 3, p.px.begin() + (y + 1) * p.w * 3);
  }
  return write_png(p.w, p.h, PNG_COLOR_TYPE_RGB, 8, false, rows);
}
#endif

// A temporary file's bytes, for the encoders that write files.
struct TempFile {
  std::string path;
  TempFile() {
    char name[] = "/tmp/tern_image_XXXXXX";
    const int fd = mkstemp(name);
    if (fd >= 0) close(fd);
    path = name;
  }
  ~TempFile() { std::remove(path.c_str()); }
  Bytes bytes() const { return read_bytes(path); }
};

#if TERN_HAVE_TIFF
Bytes write_tiff(const Pixels& p, uint16_t compression, bool big_endian = false) {
  TempFile f;
  TIFF* t = TIFFOpen(f.path.c_str(), big_endian ? "wb" : "wl");
  if (!t) return {};
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(p.w));
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(p.h));
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, static_cast<uint16_t>(p.c));
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, p.c == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
  TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 3);
  for (int64_t y = 0; y < p.h; ++y) {
    TIFFWriteScanline(t, const_cast<uint8_t*>(&p.px[static_cast<size_t>(y * p.w * p.c)]),
                      static_cast<uint32_t>(y), 0);
  }
  TIFFClose(t);
  return f.bytes();
}
#endif

#if TERN_HAVE_OPENJPEG
Bytes write_jpeg2000(const Pixels& p, bool jp2) {
  TempFile f;
  opj_cparameters_t params;
  opj_set_default_encoder_parameters(&params);
  params.tcp_numlayers = 1;
  params.tcp_rates[0] = 0;  // lossless
  params.cp_disto_alloc = 1;
  params.numresolution = 3;  // (the default 6 needs 32 pixels a side)
  std::vector<opj_image_cmptparm_t> comps(static_cast<size_t>(p.c));
  for (auto& c : comps) {
    c = {};
    c.dx = c.dy = 1;
    c.w = static_cast<OPJ_UINT32>(p.w);
    c.h = static_cast<OPJ_UINT32>(p.h);
    c.prec = 8;
  }
  opj_image_t* img = opj_image_create(static_cast<OPJ_UINT32>(p.c), comps.data(),
                                      p.c == 1 ? OPJ_CLRSPC_GRAY : OPJ_CLRSPC_SRGB);
  img->x1 = static_cast<OPJ_UINT32>(p.w);
  img->y1 = static_cast<OPJ_UINT32>(p.h);
  for (int c = 0; c < p.c; ++c) {
    for (int64_t i = 0; i < p.h * p.w; ++i)
      img->comps[c].data[i] = p.px[static_cast<size_t>(i * p.c + c)];
  }
  opj_codec_t* codec = opj_create_compress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  opj_stream_t* s = opj_stream_create_default_file_stream(f.path.c_str(), OPJ_FALSE);
  const bool ok = opj_setup_encoder(codec, &params, img) && opj_start_compress(codec, img, s) &&
                  opj_encode(codec, s) && opj_end_compress(codec, s);
  opj_stream_destroy(s);
  opj_destroy_codec(codec);
  opj_image_destroy(img);
  return ok ? f.bytes() : Bytes{};
}
#endif

Status decoded_status(const Bytes& b, const std::string& format = "") {
  Expected<Tensor> r = decode(b, format);
  return r.status();
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("ImageDecoder: BMP of every bit depth, header and row order, exactly") {
    std::mt19937 rng(7);
    const Pixels p = random_pixels(9, 13, 3, rng);  // odd width: padded rows, partial bytes
    std::vector<std::array<uint8_t, 3>> palette(256);
    for (auto& c : palette) c = {uint8_t(rng()), uint8_t(rng()), uint8_t(rng())};
    struct Case {
      const char* name;
      BmpSpec spec;
    };
    auto pal = [&](int n) {
      return std::vector<std::array<uint8_t, 3>>(palette.begin(), palette.begin() + n);
    };
    const std::vector<Case> cases = {
        {"24-bit bottom-up", {24, false, false, {}, {}}},
        {"24-bit top-down", {24, true, false, {}, {}}},
        {"24-bit OS/2 core header", {24, false, true, {}, {}}},
        {"32-bit BI_RGB", {32, false, false, {}, {}}},
        {"32-bit BI_BITFIELDS", {32, true, false, {0xFF000000u, 0x00FF0000u, 0x0000FF00u}, {}}},
        {"16-bit BI_RGB 555", {16, false, false, {}, {}}},
        {"16-bit BI_BITFIELDS 565", {16, false, false, {0xF800, 0x07E0, 0x001F}, {}}},
        {"8-bit palette", {8, false, false, {}, pal(256)}},
        {"8-bit short palette", {8, true, false, {}, pal(20)}},
        {"4-bit palette", {4, false, false, {}, pal(16)}},
        {"1-bit palette", {1, false, false, {}, pal(2)}},
        {"8-bit palette, OS/2 core header", {8, false, true, {}, pal(256)}},
    };
    for (const Case& c : cases) {
      Bytes idx(static_cast<size_t>(p.h * p.w));
      const size_t colors = c.spec.palette.empty() ? 1 : c.spec.palette.size();
      for (auto& i : idx) i = static_cast<uint8_t>(rng() % colors);
      Pixels want;
      const Bytes bmp = write_bmp(c.spec, p, idx, &want);
      check_decodes(bmp, want, 0, c.name);
    }
  }

  TEST_CASE("ImageDecoder rejects bad inputs with the exact status") {
    // Empty stream, no known magic, wrong rank, wrong dtype.
    Status st = decoded_status({});
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("empty") != std::string::npos);
    st = decoded_status({'G', 'I', 'F', '8', '9', 'a', 1, 2, 3});
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("no known image format") != std::string::npos);
    Tensor matrix = Tensor::allocate(DType::kUInt8, {2, 4}).value();
    CHECK(run_decoder(matrix).status().code() == Code::kInvalidArgument);
    Tensor floats = make_f32({4}, {1, 2, 3, 4});
    CHECK(run_decoder(floats).status().code() == Code::kUnsupported);
    CHECK(decoded_status(any_bmp(), "YUV").code() == Code::kInvalidModel);

    // A valid magic followed by junk: each format's own error.
    std::mt19937 rng(3);
    const std::vector<std::pair<const char*, Bytes>> magics = {
        {"JPEG", {0xFF, 0xD8, 0xFF}},
        {"PNG", {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'}},
        {"BMP", {'B', 'M'}},
        {"TIFF", {'I', 'I', '*', 0}},
        {"TIFF", {'M', 'M', 0, '*'}},
        {"WebP", {'R', 'I', 'F', 'F', 0x40, 0, 0, 0, 'W', 'E', 'B', 'P'}},
        {"JPEG 2000", {0xFF, 0x4F, 0xFF, 0x51}},
        {"JPEG 2000", {0, 0, 0, 0x0C, 'j', 'P', ' ', ' ', '\r', '\n', 0x87, '\n'}},
    };
    for (const auto& entry : magics) {
      const auto& name = entry.first;
      Bytes b = entry.second;
      for (int i = 0; i < 64; ++i) b.push_back(static_cast<uint8_t>(rng()));
      st = decoded_status(b);
      CAPTURE(name);
      CAPTURE(st.message());
      CHECK((st.code() == Code::kInvalidArgument || st.code() == Code::kUnsupported));
      CHECK(st.message().find(name) != std::string::npos);
    }

    // A truncated BMP names the truncation.
    const Bytes bmp = any_bmp();
    st = decoded_status(Bytes(bmp.begin(), bmp.end() - 5));
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("truncated") != std::string::npos);
  }

  TEST_CASE("ImageDecoder: a format this build has no library for answers UNSUPPORTED") {
    struct Missing {
      bool built;
      Bytes magic;
      const char* package;
    };
    const std::vector<Missing> formats = {
#if !TERN_HAVE_JPEG
      {false, {0xFF, 0xD8, 0xFF, 0xE0}, "libjpeg-dev"},
#endif
#if !TERN_HAVE_PNG
      {false, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'}, "libpng-dev"},
#endif
#if !TERN_HAVE_TIFF
      {false, {'I', 'I', '*', 0, 8, 0, 0, 0}, "libtiff-dev"},
#endif
#if !TERN_HAVE_WEBP
      {false, {'R', 'I', 'F', 'F', 4, 0, 0, 0, 'W', 'E', 'B', 'P'}, "libwebp-dev"},
#endif
#if !TERN_HAVE_OPENJPEG
      {false, {0xFF, 0x4F, 0xFF, 0x51, 0, 0}, "libopenjp2-7-dev"},
#endif
      {true, {}, ""},
    };
    for (const Missing& m : formats) {
      if (m.built) continue;
      const Status st = decoded_status(m.magic);
      CHECK(st.code() == Code::kUnsupported);
      CHECK(st.message().find(m.package) != std::string::npos);
    }
  }

  TEST_CASE("ImageDecoder: truncated and corrupted BMP never crash") {
    check_no_crash(any_bmp(), image::decode_bmp, "BMP");
  }

#if TERN_HAVE_JPEG
  TEST_CASE("ImageDecoder: JPEG colour and gray, baseline and progressive") {
    const Pixels rgb = smooth_pixels(24, 40, 3);
    check_decodes(write_jpeg(rgb), rgb, 8, "baseline RGB");
    check_decodes(write_jpeg(rgb, /*progressive=*/true), rgb, 8, "progressive RGB");
    const Pixels gray = smooth_pixels(17, 23, 1);
    check_decodes(write_jpeg(gray), gray, 4, "gray");
  }

  TEST_CASE("ImageDecoder: truncated and corrupted JPEG give errors, never a crash") {
    const Bytes jpeg = write_jpeg(smooth_pixels(16, 16, 3));
    const Status st =
        decoded_status(Bytes(jpeg.begin(), jpeg.begin() + static_cast<ptrdiff_t>(jpeg.size() / 2)));
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("JPEG") != std::string::npos);
    check_no_crash(jpeg, image::decode_jpeg, "JPEG");
    check_no_crash(write_jpeg(smooth_pixels(16, 16, 3), true), image::decode_jpeg,
                   "progressive JPEG");
  }
#endif

#if TERN_HAVE_PNG
  TEST_CASE("ImageDecoder: PNG of every colour type, depth 1-16, interlaced, exactly") {
    std::mt19937 rng(11);
    const int64_t w = 11, h = 7;
    const Pixels rgb = random_pixels(h, w, 3, rng);
    check_decodes(rgb_png(rgb), rgb, 0, "RGB 8");
    // RGBA: alpha dropped, colour kept.
    // Gray 8, gray 4 (v * 17), 16-bit RGB (high byte), palette, interlaced RGB.
    std::vector<Bytes> rgba_rows, gray_rows, gray4_rows, rgb16_rows, pal_rows;
    Pixels gray{h, w, 1, Bytes(static_cast<size_t>(h * w))};
    Pixels gray4{h, w, 1, Bytes(static_cast<size_t>(h * w))};
    Pixels rgb16_want{h, w, 3, Bytes(static_cast<size_t>(h * w * 3))};
    Pixels pal_want{h, w, 3, Bytes(static_cast<size_t>(h * w * 3))};
    std::vector<png_color> palette(37);
    for (auto& c : palette) c = {uint8_t(rng()), uint8_t(rng()), uint8_t(rng())};
    for (int64_t y = 0; y < h; ++y) {
      Bytes rgba, g, g4((w + 1) / 2, 0), r16, pal;
      for (int64_t x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) rgba.push_back(rgb.at(y, x, c));
        rgba.push_back(static_cast<uint8_t>(rng()));
        const auto gv = static_cast<uint8_t>(rng());
        g.push_back(gv);
        gray.px[static_cast<size_t>(y * w + x)] = gv;
        const auto g4v = static_cast<uint8_t>(rng() % 16);
        g4[static_cast<size_t>(x / 2)] |= static_cast<uint8_t>(g4v << (x % 2 ? 0 : 4));
        gray4.px[static_cast<size_t>(y * w + x)] = static_cast<uint8_t>(g4v * 17);
        for (int c = 0; c < 3; ++c) {
          const auto v = static_cast<uint16_t>(rng());
          r16.push_back(static_cast<uint8_t>(v >> 8));
          r16.push_back(static_cast<uint8_t>(v));
          rgb16_want.px[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(v >> 8);
        }
        const auto idx = static_cast<uint8_t>(rng() % palette.size());
        pal.push_back(idx);
        uint8_t* pw = &pal_want.px[static_cast<size_t>((y * w + x) * 3)];
        pw[0] = palette[idx].red;
        pw[1] = palette[idx].green;
        pw[2] = palette[idx].blue;
      }
      rgba_rows.push_back(rgba);
      gray_rows.push_back(g);
      gray4_rows.push_back(g4);
      rgb16_rows.push_back(r16);
      pal_rows.push_back(pal);
    }
    check_decodes(write_png(w, h, PNG_COLOR_TYPE_RGB_ALPHA, 8, false, rgba_rows), rgb, 0, "RGBA 8");
    check_decodes(write_png(w, h, PNG_COLOR_TYPE_GRAY, 8, false, gray_rows), gray, 0, "gray 8");
    check_decodes(write_png(w, h, PNG_COLOR_TYPE_GRAY, 4, false, gray4_rows), gray4, 0, "gray 4");
    check_decodes(write_png(w, h, PNG_COLOR_TYPE_RGB, 16, false, rgb16_rows), rgb16_want, 0,
                  "RGB 16");
    check_decodes(write_png(w, h, PNG_COLOR_TYPE_PALETTE, 8, false, pal_rows, palette), pal_want, 0,
                  "palette");
    std::vector<Bytes> rgb_rows;
    for (int64_t y = 0; y < h; ++y)
      rgb_rows.emplace_back(rgb.px.begin() + y * w * 3, rgb.px.begin() + (y + 1) * w * 3);
    check_decodes(write_png(w, h, PNG_COLOR_TYPE_RGB, 8, true, rgb_rows), rgb, 0, "interlaced RGB");
  }

  TEST_CASE("ImageDecoder: truncated and corrupted PNG give errors, never a crash") {
    std::mt19937 rng(5);
    const Bytes png = rgb_png(random_pixels(8, 8, 3, rng));
    const Status st =
        decoded_status(Bytes(png.begin(), png.begin() + static_cast<ptrdiff_t>(png.size() / 2)));
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("PNG") != std::string::npos);
    check_no_crash(png, image::decode_png, "PNG");
  }
#endif

#if TERN_HAVE_TIFF
  TEST_CASE("ImageDecoder: TIFF RGB and gray, little and big endian, compressed, exactly") {
    std::mt19937 rng(13);
    const Pixels rgb = random_pixels(10, 7, 3, rng);
    const Pixels gray = random_pixels(5, 9, 1, rng);
    check_decodes(write_tiff(rgb, COMPRESSION_NONE), rgb, 0, "RGB");
    check_decodes(write_tiff(rgb, COMPRESSION_LZW, /*big_endian=*/true), rgb, 0,
                  "RGB LZW big-endian");
    check_decodes(write_tiff(rgb, COMPRESSION_ADOBE_DEFLATE), rgb, 0, "RGB deflate");
    check_decodes(write_tiff(gray, COMPRESSION_PACKBITS), gray, 0, "gray PackBits");
  }

  TEST_CASE("ImageDecoder: truncated and corrupted TIFF give errors, never a crash") {
    std::mt19937 rng(17);
    const Bytes tiff = write_tiff(random_pixels(6, 6, 3, rng), COMPRESSION_LZW);
    const Status st = decoded_status(Bytes(tiff.begin(), tiff.begin() + 40));
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("TIFF") != std::string::npos);
    check_no_crash(tiff, image::decode_tiff, "TIFF");
  }
#endif

#if TERN_HAVE_WEBP
  TEST_CASE("ImageDecoder: WebP lossless exactly, lossy within bounds") {
    std::mt19937 rng(19);
    const Pixels rgb = random_pixels(9, 14, 3, rng);
    uint8_t* out = nullptr;
    size_t n = WebPEncodeLosslessRGB(rgb.px.data(), 14, 9, 14 * 3, &out);
    REQUIRE(n > 0);
    const Bytes lossless(out, out + n);
    WebPFree(out);
    check_decodes(lossless, rgb, 0, "lossless");
    const Pixels smooth = smooth_pixels(16, 16, 3);
    n = WebPEncodeRGB(smooth.px.data(), 16, 16, 16 * 3, 100, &out);
    REQUIRE(n > 0);
    const Bytes lossy(out, out + n);
    WebPFree(out);
    check_decodes(lossy, smooth, 48, "lossy");  // 4:2:0 chroma
    check_no_crash(lossless, image::decode_webp, "WebP lossless");
    check_no_crash(lossy, image::decode_webp, "WebP lossy");
    const Status st = decoded_status(Bytes(lossless.begin(), lossless.end() - 10));
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("WebP") != std::string::npos);
  }
#endif

#if TERN_HAVE_OPENJPEG
  TEST_CASE("ImageDecoder: JPEG 2000 codestream and JP2, lossless, exactly") {
    std::mt19937 rng(23);
    const Pixels rgb = random_pixels(12, 10, 3, rng);
    const Pixels gray = random_pixels(7, 9, 1, rng);
    const Bytes j2k = write_jpeg2000(rgb, false);
    const Bytes jp2 = write_jpeg2000(rgb, true);
    REQUIRE(!j2k.empty());
    REQUIRE(!jp2.empty());
    check_decodes(j2k, rgb, 0, "J2K RGB");
    check_decodes(jp2, rgb, 0, "JP2 RGB");
    check_decodes(write_jpeg2000(gray, true), gray, 0, "JP2 gray");
    const Status st = decoded_status(Bytes(jp2.begin(), jp2.begin() + 60));
    CHECK(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("JPEG 2000") != std::string::npos);
    auto j2k_decoder = [](const uint8_t* d, size_t n) {
      return image::decode_jpeg2000(d, n, false);
    };
    auto jp2_decoder = [](const uint8_t* d, size_t n) {
      return image::decode_jpeg2000(d, n, true);
    };
    check_no_crash(j2k, j2k_decoder, "J2K", 100);
    check_no_crash(jp2, jp2_decoder, "JP2", 100);
  }
#endif
}
