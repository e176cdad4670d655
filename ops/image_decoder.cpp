// ImageDecoder (opset 20): one encoded image, a 1-D uint8 tensor, decoded to uint8 [H, W, C] with
// C = 3 for pixel_format "RGB" (the default) or "BGR" and 1 for "Grayscale". The format comes from
// the stream's magic bytes; each format's decoder is in ops/image/ (codec.h). The output's height
// and width are known only once the image is decoded, so the kernel allocates it
// (outputs_from_run).
//
// Where the spec says a stream that cannot be decoded gives an empty image, this gives an error
// naming the reason (INVALID_ARGUMENT; UNSUPPORTED for a format this build has no decoder for):
// an empty image would only fail later, further from the cause.
#include <cstring>

#include "ops/common/op_utils.h"
#include "ops/image/codec.h"

namespace tern {
namespace {

enum class PixelFormat { kRgb, kBgr, kGray };

struct DecoderParams {
  PixelFormat format = PixelFormat::kRgb;
};

bool starts_with(const uint8_t* data, size_t size, const char* magic, size_t n, size_t at = 0) {
  return size >= at + n && std::memcmp(data + at, magic, n) == 0;
}

Expected<image::Decoded> decode(const uint8_t* data, size_t size) {
  if (size == 0) return invalid_argument("the encoded stream is empty");
  if (starts_with(data, size, "\xFF\xD8\xFF", 3)) return image::decode_jpeg(data, size);
  if (starts_with(data, size, "\x89PNG\r\n\x1A\n", 8)) return image::decode_png(data, size);
  if (starts_with(data, size, "BM", 2)) return image::decode_bmp(data, size);
  if (starts_with(data, size, "II*\0", 4) || starts_with(data, size, "MM\0*", 4)) {
    return image::decode_tiff(data, size);
  }
  if (starts_with(data, size, "RIFF", 4) && starts_with(data, size, "WEBP", 4, 8)) {
    return image::decode_webp(data, size);
  }
  if (starts_with(data, size, "\xFF\x4F\xFF\x51", 4)) {
    return image::decode_jpeg2000(data, size, /*jp2=*/false);
  }
  if (starts_with(data, size, "\0\0\0\x0CjP  \r\n\x87\n", 12)) {
    return image::decode_jpeg2000(data, size, /*jp2=*/true);
  }
  std::string head;
  for (size_t i = 0; i < size && i < 8; ++i) {
    static constexpr char kHex[] = "0123456789abcdef";
    head += i ? " " : "";
    head += kHex[data[i] >> 4];
    head += kHex[data[i] & 15];
  }
  return invalid_argument("the encoded stream (", size, " bytes, starting ", head,
                          ") is no known image format: JPEG, PNG, BMP, TIFF, WebP or JPEG 2000");
}

// ITU-R 601 luma in 16-bit fixed point, rounded (PIL's "L" conversion, which ONNX's reference
// outputs come from).
uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

Status infer_image_decoder(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(std::string format, ctx.attrs().get_string("pixel_format", "RGB"));
  if (format != "RGB" && format != "BGR" && format != "Grayscale") {
    return invalid_model("pixel_format is '", shorten(format),
                         "'; it must be RGB, BGR or Grayscale");
  }
  if (ctx.inputs[0].shape.size() != 1) {
    return invalid_argument("input 0 '", ctx.input_names[0],
                            "' (the encoded stream) must be 1-D, got ",
                            shape_str(ctx.inputs[0].shape));
  }
  ctx.set_output(0, DType::kUInt8, {-1, -1, format == "Grayscale" ? 1 : 3});
  ctx.outputs_from_run = true;  // the image's size is in the stream
  return Status::ok();
}

Status run_image_decoder(const DecoderParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& in = *a.inputs[0];
  TERN_ASSIGN_OR_RETURN(image::Decoded img,
                        decode(in.data<uint8_t>(), static_cast<size_t>(in.numel())));
  const int channels = p.format == PixelFormat::kGray ? 1 : 3;
  TERN_ASSIGN_OR_RETURN(
      Tensor y, Tensor::allocate_uninitialized(DType::kUInt8, {img.height, img.width, channels}));
  const int64_t n = img.height * img.width;
  const uint8_t* src = img.pixels.data();
  uint8_t* dst = y.data<uint8_t>();
  if (img.channels == channels && p.format != PixelFormat::kBgr) {
    std::memcpy(dst, src, static_cast<size_t>(n * channels));
  } else if (img.channels == 1) {  // gray to RGB/BGR
    for (int64_t i = 0; i < n; ++i) dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[i];
  } else if (p.format == PixelFormat::kGray) {
    for (int64_t i = 0; i < n; ++i) dst[i] = luma(src + 3 * i);
  } else {  // RGB to BGR
    for (int64_t i = 0; i < n; ++i) {
      dst[3 * i] = src[3 * i + 2];
      dst[3 * i + 1] = src[3 * i + 1];
      dst[3 * i + 2] = src[3 * i];
    }
  }
  *a.outputs[0] = std::move(y);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_image_decoder(const OpContext& ctx) {
  if (ctx.inputs[0].dtype != DType::kUInt8) return ops::dtype_error(ctx, 0, "uint8");
  TERN_ASSIGN_OR_RETURN(std::string format, ctx.attrs().get_string("pixel_format", "RGB"));
  DecoderParams p;
  p.format = format == "BGR"         ? PixelFormat::kBgr
             : format == "Grayscale" ? PixelFormat::kGray
                                     : PixelFormat::kRgb;
  return make_kernel("reference", p, run_image_decoder);
}

}  // namespace

TERN_REGISTRATION void register_op_image_decoder(OpRegistry& r) {
  r.add({"ImageDecoder",
         1,
         1,
         1,
         1,
         infer_image_decoder,
         make_image_decoder,
         {},
         attrs("pixel_format")});
}

}  // namespace tern
