// MelWeightMatrix (opset 17): the [dft_length / 2 + 1, num_mel_bins] matrix of triangular filters
// that maps a onesided spectrum to mel bins. Follows ONNX's reference exactly, including its
// choices the prose leaves open: num_mel_bins + 2 edge frequencies spaced evenly in mel over
// (num_mel_bins + 2) steps (the top edge is never reached), each edge floored to the bin
// ((dft_length + 1) * hertz) // sample_rate, and a filter whose left and centre bins coincide is
// a 1 at its centre. The mel edges are float32 and the rest double, as numpy computes them there.
#include <cmath>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

Status check_scalars(const OpContext& ctx) {
  for (size_t i = 0; i < 5; ++i) {
    if (numel(ctx.inputs[i].shape) != 1 || ctx.inputs[i].shape.size() > 1) {
      return invalid_argument("input '", ctx.input_names[i], "' must be one value, got ",
                              shape_str(ctx.inputs[i].shape));
    }
    const DType d = ctx.inputs[i].dtype;
    if (i < 3 && d != DType::kInt32 && d != DType::kInt64) {
      return ops::dtype_error(ctx, i, "int32 or int64");
    }
    if (i >= 3 && !dtype_is_float(d)) return ops::dtype_error(ctx, i, "float types");
  }
  return Status::ok();
}

Expected<DType> output_type(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(int64_t od, ctx.attrs().get_int("output_datatype", 1));
  const auto d = static_cast<DType>(od);
  if (!ops::visit_any_float(d, [](auto) {})) {
    return unsupported("MelWeightMatrix output_datatype ", od, " (float types only)");
  }
  return d;
}

Status infer_mel(OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_scalars(ctx));
  TERN_ASSIGN_OR_RETURN(DType d, output_type(ctx));
  TERN_ASSIGN_OR_RETURN(auto bins, ops::input_ints(ctx, 0));
  TERN_ASSIGN_OR_RETURN(auto dft, ops::input_ints(ctx, 1));
  if (bins[0] < 1 || dft[0] < 1) {
    return invalid_argument("num_mel_bins (", bins[0], ") and dft_length (", dft[0],
                            ") must be positive");
  }
  ctx.set_output(0, d, {dft[0] / 2 + 1, bins[0]});
  return Status::ok();
}

Status run_mel(const DType& d, const KernelArgs& a, const ExecContext&) {
  const int64_t mel_bins = a.inputs[0]->int_at(0), dft_length = a.inputs[1]->int_at(0);
  const int64_t rate = a.inputs[2]->int_at(0), spectrum = dft_length / 2 + 1;
  if (rate <= 0) return invalid_argument("sample_rate ", rate, " must be positive");
  auto mel = [](double hz) { return 2595.0f * std::log10(1.0f + static_cast<float>(hz) / 700.0f); };
  const float low = mel(a.inputs[3]->float_at(0)), high = mel(a.inputs[4]->float_at(0));
  const float step = (high - low) / static_cast<float>(mel_bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double m = static_cast<double>(i) * step + low;
    const double hz = 700.0 * (std::pow(10.0, m / 2595.0) - 1.0);
    const double bin =
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate));
    if (!(bin >= 0 && bin < static_cast<double>(spectrum))) {
      return invalid_argument("mel edge ", i, " (", hz, " Hz) falls outside the ", spectrum,
                              " spectrum bins");
    }
    edge[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  std::vector<double> out(static_cast<size_t>(spectrum * mel_bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    return out[static_cast<size_t>(j * mel_bins + i)];
  };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t left = edge[static_cast<size_t>(i)], centre = edge[static_cast<size_t>(i + 1)];
    const int64_t right = edge[static_cast<size_t>(i + 2)];
    if (centre == left) {
      at(centre, i) = 1.0;
    } else {
      for (int64_t j = left; j <= centre; ++j) {
        at(j, i) = static_cast<double>(j - left) / static_cast<double>(centre - left);
      }
    }
    for (int64_t j = centre; j < right; ++j) {
      at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - centre);
    }
  }
  ops::visit_any_float(d, [&](auto tag) {
    using T = decltype(tag);
    T* y = a.outputs[0]->data<T>();
    for (size_t i = 0; i < out.size(); ++i) y[i] = ops::from_double<T>(out[i]);
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_mel(const OpContext& ctx) {
  TERN_RETURN_IF_ERROR(check_scalars(ctx));
  TERN_ASSIGN_OR_RETURN(DType d, output_type(ctx));
  return make_kernel("reference", d, run_mel);
}

}  // namespace

TERN_REGISTRATION void register_op_mel_weight_matrix(OpRegistry& r) {
  r.add({"MelWeightMatrix", 5, 5, 1, 1, infer_mel, make_mel, {0, 1}, attrs("output_datatype")});
}

}  // namespace tern
