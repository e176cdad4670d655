#include "ops/common/window.h"

#include <algorithm>

namespace tern::ops {

Expected<Window> forward_window(const Attributes& attrs, const Shape& x_shape,
                                std::vector<int64_t> kernel, bool ceil_mode) {
  if (x_shape.size() < 3) {
    return invalid_argument("input must have rank >= 3 ([N, C, spatial...]), got ",
                            shape_str(x_shape));
  }
  Window w;
  w.spatial = x_shape.size() - 2;
  const size_t s = w.spatial;
  w.in.assign(x_shape.begin() + 2, x_shape.end());
  if (kernel.empty()) {
    TERN_ASSIGN_OR_RETURN(kernel, attrs.get_ints("kernel_shape"));
  }
  if (kernel.size() != s) {
    return invalid_model("kernel_shape has ", kernel.size(), " dims, the input has ", s,
                         " spatial dims");
  }
  w.kernel = kernel;
  TERN_ASSIGN_OR_RETURN(w.strides, attrs.get_ints("strides", std::vector<int64_t>(s, 1)));
  TERN_ASSIGN_OR_RETURN(w.dilations, attrs.get_ints("dilations", std::vector<int64_t>(s, 1)));
  TERN_ASSIGN_OR_RETURN(auto pads, attrs.get_ints("pads", std::vector<int64_t>(2 * s, 0)));
  TERN_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  if (w.strides.size() != s || w.dilations.size() != s || pads.size() != 2 * s) {
    return invalid_model("strides, dilations and pads must have ", s, ", ", s, " and ", 2 * s,
                         " entries");
  }
  w.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(s));
  w.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(s), pads.end());
  w.out.resize(s);
  for (size_t i = 0; i < s; ++i) {
    if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0 || w.pads_begin[i] < 0 ||
        w.pads_end[i] < 0) {
      return invalid_model("kernel, strides and dilations must be positive and pads >= 0");
    }
    const int64_t extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (w.in[i] + w.strides[i] - 1) / w.strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + extent - w.in[i]);
      w.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads_end[i] = total - w.pads_begin[i];
    } else if (auto_pad == "VALID") {
      w.pads_begin[i] = w.pads_end[i] = 0;
    } else if (auto_pad != "NOTSET") {
      return invalid_model("auto_pad '", auto_pad,
                           "' is not one of NOTSET, SAME_UPPER, "
                           "SAME_LOWER, VALID");
    }
    const int64_t span = w.in[i] + w.pads_begin[i] + w.pads_end[i] - extent;
    if (span < 0) {
      return invalid_argument("spatial dim ", i, " (", w.in[i],
                              " plus padding) is smaller than "
                              "the kernel extent ",
                              extent);
    }
    int64_t out = (ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
    // A window may not start in the end padding (the rule of ONNX's reference and PyTorch).
    if (ceil_mode && (out - 1) * w.strides[i] >= w.in[i] + w.pads_begin[i]) --out;
    w.out[i] = out;
  }
  return w;
}

Window as_3d(const Window& w) {
  Window r = w;
  const size_t missing = 3 - w.spatial;
  auto pad = [&](std::vector<int64_t>& v, int64_t fill) { v.insert(v.begin(), missing, fill); };
  pad(r.in, 1);
  pad(r.out, 1);
  pad(r.kernel, 1);
  pad(r.strides, 1);
  pad(r.dilations, 1);
  pad(r.pads_begin, 0);
  pad(r.pads_end, 0);
  r.spatial = 3;
  return r;
}

}  // namespace tern::ops
