// RoiAlign: attributes, shape inference, the sampling geometry, and the reference kernel (every
// sample interpolated on its own, sums in double). The CPU backend's kernel
// (backends/cpu/kernels/roi_align.cpp) reuses the samples of a region for all its channels.
#include "ops/roi_align.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common/op_utils.h"

namespace tern::ops {

Expected<RoiAlignParams> parse_roi_align(const OpContext& ctx) {
  RoiAlignParams p;
  const Attributes& at = ctx.attrs();
  TERN_ASSIGN_OR_RETURN(std::string mode, at.get_string("mode", "avg"));
  if (mode != "avg" && mode != "max") return invalid_model("mode '", mode, "' is not avg or max");
  p.max_mode = mode == "max";
  TERN_ASSIGN_OR_RETURN(std::string ctm,
                        at.get_string("coordinate_transformation_mode",
                                      ctx.opset >= 16 ? "half_pixel" : "output_half_pixel"));
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return invalid_model("coordinate_transformation_mode '", ctm,
                         "' is not half_pixel or output_half_pixel");
  }
  p.half_pixel = ctm == "half_pixel";
  TERN_ASSIGN_OR_RETURN(p.out_h, at.get_int("output_height", 1));
  TERN_ASSIGN_OR_RETURN(p.out_w, at.get_int("output_width", 1));
  TERN_ASSIGN_OR_RETURN(p.sampling_ratio, at.get_int("sampling_ratio", 0));
  TERN_ASSIGN_OR_RETURN(p.spatial_scale, at.get_float("spatial_scale", 1.0f));
  if (p.out_h < 1 || p.out_w < 1 || p.sampling_ratio < 0) {
    return invalid_model(
        "output_height and output_width must be positive, sampling_ratio not "
        "negative");
  }
  const Shape& x = ctx.inputs[0].shape;
  const Shape& rois = ctx.inputs[1].shape;
  const Shape& idx = ctx.inputs[2].shape;
  if (x.size() != 4 || rois.size() != 2 || rois[1] != 4 || idx.size() != 1 || idx[0] != rois[0]) {
    return invalid_argument("X must be [N, C, H, W], rois [R, 4] and batch_indices [R]; got ",
                            shape_str(x), ", ", shape_str(rois), ", ", shape_str(idx));
  }
  if (!dtype_is_float(ctx.inputs[0].dtype)) return dtype_error(ctx, 0, "float types");
  TERN_RETURN_IF_ERROR(require_same_dtype(ctx, 0, 1));
  if (ctx.inputs[2].dtype != DType::kInt64 && ctx.inputs[2].dtype != DType::kInt32) {
    return dtype_error(ctx, 2, "int64");
  }
  p.batch = x[0], p.channels = x[1], p.height = x[2], p.width = x[3], p.rois = rois[0];
  return p;
}

std::vector<RoiSample> roi_samples(const RoiAlignParams& p, const float* roi, int64_t* grid_count) {
  const float offset = p.half_pixel ? 0.5f : 0.0f;
  const float start_w = roi[0] * p.spatial_scale - offset;
  const float start_h = roi[1] * p.spatial_scale - offset;
  float roi_w = roi[2] * p.spatial_scale - offset - start_w;
  float roi_h = roi[3] * p.spatial_scale - offset - start_h;
  if (!p.half_pixel) {  // the legacy mode forces regions of at least one pixel
    roi_w = std::max(roi_w, 1.0f);
    roi_h = std::max(roi_h, 1.0f);
  }
  const float bin_h = roi_h / static_cast<float>(p.out_h);
  const float bin_w = roi_w / static_cast<float>(p.out_w);
  const int64_t grid_h =
      p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(roi_h / p.out_h));
  const int64_t grid_w =
      p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(roi_w / p.out_w));
  *grid_count = std::max<int64_t>(grid_h * grid_w, 1);
  std::vector<RoiSample> out;
  out.reserve(static_cast<size_t>(p.out_h * p.out_w * std::max<int64_t>(grid_h, 0) *
                                  std::max<int64_t>(grid_w, 0)));
  const auto H = static_cast<float>(p.height), W = static_cast<float>(p.width);
  for (int64_t ph = 0; ph < p.out_h; ++ph) {
    for (int64_t pw = 0; pw < p.out_w; ++pw) {
      for (int64_t iy = 0; iy < grid_h; ++iy) {
        float y = start_h + static_cast<float>(ph) * bin_h +
                  (static_cast<float>(iy) + 0.5f) * bin_h / static_cast<float>(grid_h);
        for (int64_t ix = 0; ix < grid_w; ++ix) {
          float x = start_w + static_cast<float>(pw) * bin_w +
                    (static_cast<float>(ix) + 0.5f) * bin_w / static_cast<float>(grid_w);
          RoiSample s;
          if (y < -1.0f || y > H || x < -1.0f || x > W) {  // outside: contributes 0
            out.push_back(s);
            continue;
          }
          float yy = std::max(y, 0.0f), xx = std::max(x, 0.0f);
          auto y_low = static_cast<int64_t>(yy), x_low = static_cast<int64_t>(xx);
          int64_t y_high = y_low + 1, x_high = x_low + 1;
          if (y_low >= p.height - 1) y_high = y_low = p.height - 1, yy = static_cast<float>(y_low);
          if (x_low >= p.width - 1) x_high = x_low = p.width - 1, xx = static_cast<float>(x_low);
          const float ly = yy - static_cast<float>(y_low), lx = xx - static_cast<float>(x_low);
          const float hy = 1.0f - ly, hx = 1.0f - lx;
          s.o1 = y_low * p.width + x_low;
          s.o2 = y_low * p.width + x_high;
          s.o3 = y_high * p.width + x_low;
          s.o4 = y_high * p.width + x_high;
          s.w1 = hy * hx, s.w2 = hy * lx, s.w3 = ly * hx, s.w4 = ly * lx;
          out.push_back(s);
        }
      }
    }
  }
  return out;
}

namespace {

Status infer_roi_align(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(RoiAlignParams p, parse_roi_align(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, {p.rois, p.channels, p.out_h, p.out_w});
  return Status::ok();
}

Status run_reference(const RoiAlignParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& X = *a.inputs[0];
  const Tensor& R = *a.inputs[1];
  const Tensor& I = *a.inputs[2];
  Tensor& Y = *a.outputs[0];
  const int64_t plane = p.height * p.width;
  for (int64_t r = 0; r < p.rois; ++r) {
    const int64_t b = I.int_at(r);
    if (b < 0 || b >= p.batch) {
      return invalid_argument("batch_indices[", r, "] is ", b, ", outside 0..", p.batch - 1);
    }
    float roi[4];
    for (int k = 0; k < 4; ++k) roi[k] = static_cast<float>(R.float_at(r * 4 + k));
    int64_t count = 1;
    const std::vector<RoiSample> samples = roi_samples(p, roi, &count);
    const auto per_bin = static_cast<int64_t>(samples.size()) / (p.out_h * p.out_w);
    for (int64_t c = 0; c < p.channels; ++c) {
      const int64_t base = (b * p.channels + c) * plane;
      auto v = [&](int64_t o) { return X.float_at(base + o); };
      for (int64_t bin = 0; bin < p.out_h * p.out_w; ++bin) {
        double acc = p.max_mode ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t k = 0; k < per_bin; ++k) {
          const RoiSample& s = samples[static_cast<size_t>(bin * per_bin + k)];
          if (p.max_mode) {
            acc = std::max({acc, s.w1 * v(s.o1), s.w2 * v(s.o2), s.w3 * v(s.o3), s.w4 * v(s.o4)});
          } else {
            acc += s.w1 * v(s.o1) + s.w2 * v(s.o2) + s.w3 * v(s.o3) + s.w4 * v(s.o4);
          }
        }
        const double out = p.max_mode ? (per_bin ? acc : 0.0) : acc / static_cast<double>(count);
        const int64_t at = (r * p.channels + c) * p.out_h * p.out_w + bin;
        visit_any_float(Y.dtype(), [&](auto tag) {
          using T = decltype(tag);
          Y.data<T>()[at] = from_double<T>(out);
        });
      }
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_roi_align(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(require_plain_layout(ctx));
  TERN_ASSIGN_OR_RETURN(RoiAlignParams p, parse_roi_align(ctx));
  return make_kernel("reference", p, run_reference);
}

}  // namespace
}  // namespace tern::ops

namespace tern {

TERN_REGISTRATION void register_op_roi_align(OpRegistry& r) {
  r.add({"RoiAlign",
         3,
         3,
         1,
         1,
         ops::infer_roi_align,
         ops::make_roi_align,
         {},
         attrs("coordinate_transformation_mode, mode, output_height, output_width, sampling_ratio, "
               "spatial_scale")});
}

}  // namespace tern
