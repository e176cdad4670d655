// BMP, parsed here (no library needed): the Windows headers (BITMAPINFOHEADER and its V2-V5
// extensions) and the OS/2 core header; 1/4/8-bit palettes, 16/32-bit with the default or
// BI_BITFIELDS masks, 24-bit; bottom-up or top-down rows. RLE and embedded JPEG/PNG are refused.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>

#include "ops/image/codec.h"

namespace tern::image {
namespace {

uint32_t le16(const uint8_t* p) {
  return p[0] | (p[1] << 8);
}
uint32_t le32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

enum Compression : uint32_t { kRgb = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3, kAlphaBitfields = 6 };

// One colour of a BI_BITFIELDS pixel: its mask's position, scaled to 8 bits.
struct Field {
  uint32_t mask = 0;
  int shift = 0, bits = 0;
  explicit Field(uint32_t m) : mask(m) {
    if (m == 0) return;
    shift = std::countr_zero(m);
    bits = std::popcount(m);
  }
  uint8_t operator()(uint32_t px) const {
    if (bits == 0) return 0;
    const uint32_t v = (px & mask) >> shift;
    if (bits >= 8) return static_cast<uint8_t>(v >> (bits - 8));
    const uint32_t max = (1u << bits) - 1;
    return static_cast<uint8_t>((v * 255 + max / 2) / max);
  }
};

}  // namespace

Expected<Decoded> decode_bmp(const uint8_t* data, size_t size) {
  if (size < 26) return invalid_argument("BMP: ", size, " bytes is too short for the headers");
  const uint32_t offset = le32(data + 10);
  const uint32_t header = le32(data + 14);
  int64_t width = 0, height = 0;
  uint32_t bpp = 0, compression = kRgb, colors = 0, planes = 0;
  size_t entry = 4;  // bytes per palette colour
  size_t after_header = 14 + static_cast<size_t>(header);
  std::array<uint32_t, 3> masks{};
  bool have_masks = false;
  if (header == 12) {  // OS/2 BITMAPCOREHEADER
    width = le16(data + 18);
    height = static_cast<int16_t>(le16(data + 20));
    planes = le16(data + 22);
    bpp = le16(data + 24);
    entry = 3;
  } else if (header >= 40 && header <= 124) {
    if (size < after_header) return invalid_argument("BMP: the header ends early (truncated)");
    width = static_cast<int32_t>(le32(data + 18));
    height = static_cast<int32_t>(le32(data + 22));
    planes = le16(data + 26);
    bpp = le16(data + 28);
    compression = le32(data + 30);
    colors = le32(data + 46);
    if (compression == kBitfields || compression == kAlphaBitfields) {
      if (header == 40) {  // the masks follow the header
        after_header += compression == kBitfields ? 12 : 16;
        if (size < after_header) return invalid_argument("BMP: the masks end early (truncated)");
      } else if (header < 52) {
        return invalid_argument("BMP: a ", header, "-byte header cannot hold BI_BITFIELDS masks");
      }
      for (size_t i = 0; i < masks.size(); ++i) masks[i] = le32(data + 54 + 4 * i);
      have_masks = true;
    }
  } else {
    return invalid_argument("BMP: unknown header size ", header);
  }
  if (planes != 1) return invalid_argument("BMP: ", planes, " planes (must be 1)");
  if (compression == kRle8 || compression == kRle4) {
    return unsupported("BMP: RLE-compressed bitmaps are not supported");
  }
  if (compression != kRgb && !have_masks) {
    return unsupported("BMP: compression ", compression, " (embedded JPEG/PNG) is not supported");
  }
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) {
    return invalid_argument("BMP: ", bpp, " bits per pixel");
  }
  if (have_masks && bpp != 16 && bpp != 32) {
    return invalid_argument("BMP: BI_BITFIELDS with ", bpp, " bits per pixel");
  }
  const bool top_down = height < 0;
  height = std::abs(height);

  // The palette: `colors` entries (all 2^bpp when 0) right after the header.
  std::vector<std::array<uint8_t, 3>> palette;
  if (bpp <= 8) {
    const uint32_t full = 1u << bpp;
    const uint32_t n = colors == 0 || colors > full ? full : colors;
    if (after_header + n * entry > size) return invalid_argument("BMP: the palette ends early");
    for (uint32_t i = 0; i < n; ++i) {
      const uint8_t* c = data + after_header + i * entry;
      palette.push_back({c[2], c[1], c[0]});
    }
  }
  if (!have_masks) {
    masks = bpp == 16 ? std::array<uint32_t, 3>{0x7C00, 0x03E0, 0x001F}
                      : std::array<uint32_t, 3>{0xFF0000, 0x00FF00, 0x0000FF};
  }
  const Field red(masks[0]), green(masks[1]), blue(masks[2]);

  Decoded img;
  TERN_RETURN_IF_ERROR(allocate(&img, width, height, 3, "BMP"));
  const size_t stride = static_cast<size_t>((width * bpp + 31) / 32 * 4);
  if (offset > size || (size - offset) / stride < static_cast<size_t>(height)) {
    return invalid_argument("BMP: the pixel data ends early (truncated): ", height, " rows of ",
                            stride, " bytes from offset ", offset, " in ", size, " bytes");
  }
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row =
        data + offset + stride * static_cast<size_t>(top_down ? y : height - 1 - y);
    uint8_t* dst = img.pixels.data() + static_cast<size_t>(y * width * 3);
    for (int64_t x = 0; x < width; ++x, dst += 3) {
      if (bpp <= 8) {
        const int64_t bit = x * bpp;
        const uint32_t byte = row[bit / 8];
        const uint32_t index = (byte >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
        // An index past the palette reads black (as Windows draws it).
        static constexpr std::array<uint8_t, 3> kBlack{0, 0, 0};
        const auto& c = index < palette.size() ? palette[index] : kBlack;
        std::copy(c.begin(), c.end(), dst);
      } else if (bpp == 24) {
        const uint8_t* p = row + x * 3;
        dst[0] = p[2];
        dst[1] = p[1];
        dst[2] = p[0];
      } else {
        const uint32_t px = bpp == 16 ? le16(row + x * 2) : le32(row + x * 4);
        dst[0] = red(px);
        dst[1] = green(px);
        dst[2] = blue(px);
      }
    }
  }
  return img;
}

}  // namespace tern::image
