// Detection and image-geometry ops: NonMaxSuppression (data-dependent output), CenterCropPad,
// AffineGrid (2-D and 3-D) and Col2Im (N-D).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

// ---- NonMaxSuppression --------------------------------------------------------------------------
// Greedy selection per batch and class: candidates above the score threshold in descending score
// order (ties by index), each kept unless its IoU with a box kept before exceeds the threshold,
// at most max_output_boxes_per_class of them. The number selected is known only when it runs.

struct Box {
  float y1, x1, y2, x2, area;
};

// Batch b's boxes, corners ordered (center_point_box 1: [x_center, y_center, width, height]).
std::vector<Box> read_boxes(const Tensor& boxes, int64_t b, int64_t n, bool center) {
  std::vector<Box> out(static_cast<size_t>(n));
  const bool f32 = boxes.dtype() == DType::kFloat32;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = (b * n + i) * 4;
    float v[4];
    for (int k = 0; k < 4; ++k) {
      v[k] = f32 ? boxes.data<float>()[o + k] : static_cast<float>(boxes.float_at(o + k));
    }
    Box& x = out[static_cast<size_t>(i)];
    if (center) {
      x = {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2, 0};
    } else {
      x = {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]),
           std::max(v[1], v[3]), 0};
    }
    x.area = (x.y2 - x.y1) * (x.x2 - x.x1);
  }
  return out;
}

// The boxes kept so far, also ordered by their left edge, so that a candidate is tested only
// against kept boxes whose horizontal extent can reach it: a detector keeps thousands, spread
// over the image (and, with torchvision's per-class offsets, over disjoint regions per class).
struct KeptBoxes {
  std::vector<Box> boxes;
  std::vector<uint32_t> by_x1;  // indices into boxes, ascending x1
  float widest = 0;
  void clear() {
    boxes.clear();
    by_x1.clear();
    widest = 0;
  }
  void add(const Box& b) {
    const auto at = std::upper_bound(by_x1.begin(), by_x1.end(), b.x1,
                                     [&](float x, uint32_t k) { return x < boxes[k].x1; });
    by_x1.insert(at, static_cast<uint32_t>(boxes.size()));
    boxes.push_back(b);
    widest = std::max(widest, b.x2 - b.x1);
  }
  // Whether a kept box overlaps `a` by more than `threshold` (IoU).
  bool suppresses(const Box& a, float threshold) const {
    // Kept boxes starting left of a.x1 - widest end before a begins: none of them overlaps.
    auto k = std::lower_bound(by_x1.begin(), by_x1.end(), a.x1 - widest,
                              [&](uint32_t i, float x) { return boxes[i].x1 < x; });
    for (; k != by_x1.end() && boxes[*k].x1 <= a.x2; ++k) {
      const Box& b = boxes[*k];
      const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
      const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
      if (ih <= 0 || iw <= 0) continue;
      const float inter = ih * iw;
      const float uni = a.area + b.area - inter;
      if (uni > 0 && inter / uni > threshold) return true;
    }
    return false;
  }
};

struct NmsParams {
  bool center = false;
};

Status infer_nms(OpContext& ctx) {
  const Shape& b = ctx.inputs[0].shape;
  const Shape& s = ctx.inputs[1].shape;
  if (b.size() != 3 || b[2] != 4 || s.size() != 3 || s[0] != b[0] || s[2] != b[1]) {
    return invalid_argument("boxes must be [B, N, 4] and scores [B, C, N], got ", shape_str(b),
                            " and ", shape_str(s));
  }
  for (size_t i = 2; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.inputs[i].shape.size() > 1) {
      return invalid_argument("input ", i, " '", ctx.input_names[i], "' must be a scalar");
    }
  }
  ctx.set_output(0, DType::kInt64, {-1, 3});
  ctx.outputs_from_run = true;  // how many boxes are selected
  return Status::ok();
}

Status run_nms(const NmsParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& boxes = *a.inputs[0];
  const Tensor& scores = *a.inputs[1];
  auto scalar = [&](size_t i) -> const Tensor* {
    return i < a.inputs.size() && a.inputs[i] && a.inputs[i]->numel() ? a.inputs[i] : nullptr;
  };
  const int64_t batches = boxes.shape()[0], n = boxes.shape()[1], classes = scores.shape()[1];
  const int64_t limit = scalar(2) ? scalar(2)->int_at(0) : 0;
  const auto iou_th = static_cast<float>(scalar(3) ? scalar(3)->float_at(0) : 0.0);
  const bool has_score_th = scalar(4) != nullptr;
  const auto score_th = static_cast<float>(has_score_th ? scalar(4)->float_at(0) : 0.0);
  std::vector<int64_t> out;
  std::vector<float> sc(static_cast<size_t>(n));
  std::vector<int64_t> cand, kept;
  KeptBoxes soa;
  for (int64_t b = 0; b < batches && limit > 0; ++b) {
    const std::vector<Box> bx = read_boxes(boxes, b, n, p.center);
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t base = (b * classes + c) * n;
      cand.clear();
      for (int64_t i = 0; i < n; ++i) {
        sc[static_cast<size_t>(i)] = scores.dtype() == DType::kFloat32
                                         ? scores.data<float>()[base + i]
                                         : static_cast<float>(scores.float_at(base + i));
        if (!has_score_th || sc[static_cast<size_t>(i)] > score_th) cand.push_back(i);
      }
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t l, int64_t r) {
        return sc[static_cast<size_t>(l)] > sc[static_cast<size_t>(r)];
      });
      kept.clear();
      soa.clear();
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        const Box& bi = bx[static_cast<size_t>(i)];
        if (!soa.suppresses(bi, iou_th)) {
          kept.push_back(i);
          soa.add(bi);
        }
      }
      for (int64_t k : kept) out.insert(out.end(), {b, c, k});
    }
  }
  const auto selected = static_cast<int64_t>(out.size() / 3);
  TERN_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(DType::kInt64, {selected, 3}));
  std::copy(out.begin(), out.end(), y.data<int64_t>());
  *a.outputs[0] = std::move(y);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_nms(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t cpb, ctx.attrs().get_int("center_point_box", 0));
  if (ctx.inputs[0].dtype != ctx.inputs[1].dtype || !dtype_is_float(ctx.inputs[0].dtype)) {
    return ops::dtype_error(ctx, 0, "float types (boxes and scores alike)");
  }
  return make_kernel("nms", NmsParams{cpb != 0}, run_nms);
}

// ---- CenterCropPad ------------------------------------------------------------------------------

struct CropParams {
  DType dtype;
  Shape in, out;
};

Expected<CropParams> crop_params(const OpContext& ctx) {
  const Shape& x = ctx.inputs[0].shape;
  TERN_ASSIGN_OR_RETURN(auto shape, ops::input_ints(ctx, 1));
  std::vector<int64_t> axes(x.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.attrs().has("axes")) {
    TERN_ASSIGN_OR_RETURN(axes, ctx.attrs().get_ints("axes"));
  }
  if (axes.size() != shape.size()) return invalid_model(ctx.where, ": shape and axes differ in length");
  CropParams p{ctx.inputs[0].dtype, x, x};
  for (size_t i = 0; i < axes.size(); ++i) {
    TERN_ASSIGN_OR_RETURN(int64_t a, ops::normalize_axis(axes[i], static_cast<int64_t>(x.size())));
    if (shape[i] < 0) return invalid_argument(ctx.where, ": negative target size");
    p.out[static_cast<size_t>(a)] = shape[i];
  }
  return p;
}

Status infer_crop(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(CropParams p, crop_params(ctx));
  ctx.set_output(0, ctx.inputs[0].dtype, p.out);
  return Status::ok();
}

Status run_crop(const CropParams& p, const KernelArgs& a, const ExecContext&) {
  const size_t r = p.in.size();
  std::vector<int64_t> shift(r), ist(r, 1), pos(r, 0);
  for (size_t d = r; d-- > 1;) ist[d - 1] = ist[d] * p.in[d];
  for (size_t d = 0; d < r; ++d) {
    // Crop takes the centre (start (in - out) / 2); pad centres the input (start (out - in) / 2).
    shift[d] = p.in[d] >= p.out[d] ? (p.in[d] - p.out[d]) / 2 : -((p.out[d] - p.in[d]) / 2);
  }
  Tensor& y = *a.outputs[0];
  if (p.dtype != DType::kString) std::memset(y.raw(), 0, y.byte_size());
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d < r && inside; ++d) {
      const int64_t k = pos[d] + shift[d];
      inside = k >= 0 && k < p.in[d];
      off += k * ist[d];
    }
    if (inside) ops::copy_elements(p.dtype, a.inputs[0]->raw(), off, y.raw(), o, 1);
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < p.out[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_crop(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(CropParams p, crop_params(ctx));
  return make_kernel("reference", std::move(p), run_crop);
}

// ---- AffineGrid ---------------------------------------------------------------------------------

struct GridParams {
  bool align;
  std::vector<int64_t> size;  // N, C, (D,) H, W
};

Status infer_affine(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(auto size, ops::input_ints(ctx, 1));
  if (size.size() != 4 && size.size() != 5) return invalid_model(ctx.where, ": size must have 4 or 5 values");
  Shape out = {size[0]};
  out.insert(out.end(), size.begin() + 2, size.end());
  out.push_back(static_cast<int64_t>(size.size()) - 2);
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

double base_coord(int64_t i, int64_t n, bool align) {
  if (align) return n > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
  return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n) - 1.0;
}

Status run_affine(const GridParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& th = *a.inputs[0];
  const bool three = p.size.size() == 5;
  const int64_t dims = three ? 3 : 2;
  const int64_t D = three ? p.size[2] : 1, H = p.size[p.size.size() - 2], W = p.size.back();
  std::vector<double> out(static_cast<size_t>(a.outputs[0]->numel()));
  size_t w_at = 0;
  for (int64_t n = 0; n < p.size[0]; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t w = 0; w < W; ++w) {
          const double src[4] = {base_coord(w, W, p.align), base_coord(h, H, p.align),
                                 three ? base_coord(d, D, p.align) : 1.0, 1.0};
          for (int64_t r = 0; r < dims; ++r) {
            double acc = 0;
            for (int64_t c = 0; c <= dims; ++c) {
              const double v = c == dims ? 1.0 : src[c];
              acc += th.float_at((n * dims + r) * (dims + 1) + c) * v;
            }
            out[w_at++] = acc;
          }
        }
      }
    }
  }
  ops::visit_any_float(a.outputs[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < out.size(); ++i) a.outputs[0]->data<T>()[i] = ops::from_double<T>(out[i]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_affine(const OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) return ops::dtype_error(ctx, 0, "float types");
  GridParams p{false, {}};
  TERN_ASSIGN_OR_RETURN(int64_t align, ctx.attrs().get_int("align_corners", 0));
  p.align = align != 0;
  TERN_ASSIGN_OR_RETURN(p.size, ops::input_ints(ctx, 1));
  const int64_t dims = static_cast<int64_t>(p.size.size()) - 2;
  if (ctx.inputs[0].shape != Shape{p.size[0], dims, dims + 1}) {
    return invalid_model(ctx.where, ": theta must be [N, ", dims, ", ", dims + 1, "]");
  }
  return make_kernel("reference", std::move(p), run_affine);
}

// ---- Col2Im -------------------------------------------------------------------------------------

struct Col2ImParams {
  std::vector<int64_t> image, block, dil, pads, strides, cols;
  int64_t n, c;
};

Expected<Col2ImParams> col2im_params(const OpContext& ctx) {
  Col2ImParams p;
  TERN_ASSIGN_OR_RETURN(p.image, ops::input_ints(ctx, 1));
  TERN_ASSIGN_OR_RETURN(p.block, ops::input_ints(ctx, 2));
  const size_t s = p.image.size();
  if (p.block.size() != s) return invalid_model(ctx.where, ": image_shape and block_shape differ");
  TERN_ASSIGN_OR_RETURN(p.dil, ctx.attrs().get_ints("dilations", std::vector<int64_t>(s, 1)));
  TERN_ASSIGN_OR_RETURN(p.pads, ctx.attrs().get_ints("pads", std::vector<int64_t>(2 * s, 0)));
  TERN_ASSIGN_OR_RETURN(p.strides, ctx.attrs().get_ints("strides", std::vector<int64_t>(s, 1)));
  const Shape& x = ctx.inputs[0].shape;
  const int64_t kprod = std::accumulate(p.block.begin(), p.block.end(), int64_t{1}, std::multiplies<>());
  if (x.size() != 3 || kprod == 0 || x[1] % kprod) return invalid_model(ctx.where, ": input must be [N, C*prod(block), L]");
  p.n = x[0], p.c = x[1] / kprod;
  int64_t L = 1;
  for (size_t d = 0; d < s; ++d) {
    const int64_t span = p.dil[d] * (p.block[d] - 1) + 1;
    p.cols.push_back((p.image[d] + p.pads[d] + p.pads[d + s] - span) / p.strides[d] + 1);
    L *= p.cols.back();
  }
  if (L != x[2]) return invalid_model(ctx.where, ": L is ", x[2], ", the geometry gives ", L);
  return p;
}

Status infer_col2im(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(Col2ImParams p, col2im_params(ctx));
  Shape out = {p.n, p.c};
  out.insert(out.end(), p.image.begin(), p.image.end());
  ctx.set_output(0, ctx.inputs[0].dtype, out);
  return Status::ok();
}

Status run_col2im(const Col2ImParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  const size_t s = p.image.size();
  const int64_t kprod = x.shape()[1] / p.c, L = x.shape()[2];
  const int64_t img = std::accumulate(p.image.begin(), p.image.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> out(static_cast<size_t>(p.n * p.c * img), 0.0);
  std::vector<int64_t> kpos(s), lpos(s);
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t c = 0; c < p.c; ++c) {
      for (int64_t k = 0; k < kprod; ++k) {
        for (int64_t r = k, d = static_cast<int64_t>(s) - 1; d >= 0; --d) {
          kpos[static_cast<size_t>(d)] = r % p.block[static_cast<size_t>(d)];
          r /= p.block[static_cast<size_t>(d)];
        }
        for (int64_t l = 0; l < L; ++l) {
          for (int64_t r = l, d = static_cast<int64_t>(s) - 1; d >= 0; --d) {
            lpos[static_cast<size_t>(d)] = r % p.cols[static_cast<size_t>(d)];
            r /= p.cols[static_cast<size_t>(d)];
          }
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < s && inside; ++d) {
            const int64_t i = lpos[d] * p.strides[d] - p.pads[d] + kpos[d] * p.dil[d];
            inside = i >= 0 && i < p.image[d];
            off = off * p.image[d] + i;
          }
          if (inside) out[static_cast<size_t>((n * p.c + c) * img + off)] += x.float_at((n * x.shape()[1] + c * kprod + k) * L + l);
        }
      }
    }
  }
  ops::visit_any_float(a.outputs[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < out.size(); ++i) a.outputs[0]->data<T>()[i] = ops::from_double<T>(out[i]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_col2im(const OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) return ops::dtype_error(ctx, 0, "float types");
  TERN_ASSIGN_OR_RETURN(Col2ImParams p, col2im_params(ctx));
  return make_kernel("reference", std::move(p), run_col2im);
}

}  // namespace

TERN_REGISTRATION void register_op_vision(OpRegistry& r) {
  r.add({"NonMaxSuppression", 2, 5, 1, 1, infer_nms, make_nms, {}, attrs("center_point_box")});
  r.add({"CenterCropPad", 2, 2, 1, 1, infer_crop, make_crop, {1}, attrs("axes")});
  r.add({"AffineGrid", 2, 2, 1, 1, infer_affine, make_affine, {1}, attrs("align_corners")});
  r.add(
      {"Col2Im", 3, 3, 1, 1, infer_col2im, make_col2im, {1, 2}, attrs("dilations, pads, strides")});
}

}  // namespace tern
