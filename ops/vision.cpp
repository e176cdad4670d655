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

struct Box {
  double y1, x1, y2, x2;
};

Box box_at(const Tensor& boxes, int64_t b, int64_t i, int64_t n, bool center) {
  const int64_t o = (b * n + i) * 4;
  const double v0 = boxes.float_at(o), v1 = boxes.float_at(o + 1), v2 = boxes.float_at(o + 2),
               v3 = boxes.float_at(o + 3);
  if (center) return {v1 - v3 / 2, v0 - v2 / 2, v1 + v3 / 2, v0 + v2 / 2};
  return {std::min(v0, v2), std::min(v1, v3), std::max(v0, v2), std::max(v1, v3)};
}

double iou(const Box& a, const Box& b) {
  const double ih = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double iw = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double inter = ih * iw;
  const double uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

Expected<std::vector<int64_t>> nms(const OpContext& ctx, const Tensor& boxes, const Tensor& scores,
                                   const Tensor* max_out, const Tensor* iou_t, const Tensor* score_t) {
  TERN_ASSIGN_OR_RETURN(int64_t cpb, ctx.attrs().get_int("center_point_box", 0));
  if (boxes.rank() != 3 || boxes.shape()[2] != 4 || scores.rank() != 3 ||
      scores.shape()[0] != boxes.shape()[0] || scores.shape()[2] != boxes.shape()[1]) {
    return invalid_argument(ctx.where, ": boxes must be [B, N, 4] and scores [B, C, N]");
  }
  const int64_t batches = boxes.shape()[0], n = boxes.shape()[1], classes = scores.shape()[1];
  const int64_t limit = max_out && max_out->numel() ? max_out->int_at(0) : 0;
  const double iou_th = iou_t && iou_t->numel() ? iou_t->float_at(0) : 0.0;
  const bool has_score_th = score_t && score_t->numel();
  const double score_th = has_score_th ? score_t->float_at(0) : 0.0;
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < n; ++i) {
        if (!has_score_th || scores.float_at((b * classes + c) * n + i) > score_th) cand.push_back(i);
      }
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t l, int64_t r) {
        return scores.float_at((b * classes + c) * n + l) > scores.float_at((b * classes + c) * n + r);
      });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        const Box bi = box_at(boxes, b, i, n, cpb != 0);
        bool keep = true;
        for (int64_t k : kept) {
          if (iou(bi, box_at(boxes, b, k, n, cpb != 0)) > iou_th) {
            keep = false;
            break;
          }
        }
        if (keep) kept.push_back(i);
      }
      for (int64_t k : kept) out.insert(out.end(), {b, c, k});
    }
  }
  return out;
}

const Tensor* opt_value(const OpContext& ctx, size_t i) {
  return ctx.has_input(i) ? ctx.inputs[i].value : nullptr;
}

Status infer_nms(OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(auto sel, nms(ctx, *ctx.inputs[0].value, *ctx.inputs[1].value,
                                      opt_value(ctx, 2), opt_value(ctx, 3), opt_value(ctx, 4)));
  ctx.set_output(0, DType::kInt64, {static_cast<int64_t>(sel.size() / 3), 3});
  ctx.output_values[0] = ops::make_int64_tensor(sel, {static_cast<int64_t>(sel.size() / 3), 3});
  return Status::ok();
}

Status run_nms(const int&, const KernelArgs&, const ExecContext&) {
  return internal_error("NonMaxSuppression is computed during shape inference");
}

Expected<std::unique_ptr<Kernel>> make_nms(const OpContext&) {
  return make_kernel("reference", 0, run_nms);
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

void register_op_vision(OpRegistry& r) {
  r.add({"NonMaxSuppression", 2, 5, 1, 1, infer_nms, make_nms, {0, 1, 2, 3, 4}});
  r.add({"CenterCropPad", 2, 2, 1, 1, infer_crop, make_crop, {1}});
  r.add({"AffineGrid", 2, 2, 1, 1, infer_affine, make_affine, {1}});
  r.add({"Col2Im", 3, 3, 1, 1, infer_col2im, make_col2im, {1, 2}});
}

}  // namespace tern
