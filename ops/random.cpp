// Random ops: Dropout (identity at inference; training_mode drops with a Bernoulli mask and scales
// by 1 / (1 - ratio)), Bernoulli, RandomUniformLike, RandomNormalLike. A `seed` attribute makes a
// run reproducible; without one each run draws a fresh seed.
#include <random>

#include "ops/common/op_utils.h"

namespace tern {
namespace {

struct RandomParams {
  bool seeded = false;
  uint64_t seed = 0;
  DType dtype = DType::kFloat32;
  double a = 0, b = 1;  // uniform [a, b) or normal (mean a, scale b)
  float ratio = 0.5f;   // Dropout before opset 12
};

Expected<RandomParams> random_params(const OpContext& ctx) {
  RandomParams p;
  if (const Attribute* s = ctx.attrs().find("seed")) {
    p.seeded = true;
    p.seed = static_cast<uint64_t>(static_cast<int64_t>(s->kind == Attribute::Kind::kFloat ? s->f : s->i));
  }
  return p;
}

std::mt19937_64 make_gen(const RandomParams& p) {
  return std::mt19937_64(p.seeded ? p.seed : std::random_device{}());
}

// ---- Dropout ------------------------------------------------------------------------------------

Status infer_dropout(OpContext& ctx) {
  ctx.set_output(0, ctx.inputs[0].dtype, ctx.inputs[0].shape);
  if (ctx.outputs.size() > 1) ctx.set_output(1, DType::kBool, ctx.inputs[0].shape);
  return Status::ok();
}

Status run_dropout(const RandomParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  double ratio = p.ratio;
  bool training = false;
  if (a.inputs.size() > 1 && a.inputs[1]) ratio = a.inputs[1]->float_at(0);
  if (a.inputs.size() > 2 && a.inputs[2]) training = a.inputs[2]->int_at(0) != 0;
  if (ratio < 0 || ratio >= 1) {
    if (training) return invalid_argument("Dropout ratio ", ratio, " is outside [0, 1)");
  }
  Tensor& y = *a.outputs[0];
  uint8_t* mask = a.outputs.size() > 1 && a.outputs[1] ? a.outputs[1]->data<uint8_t>() : nullptr;
  if (!training || ratio == 0) {
    ops::copy_elements(x.dtype(), x.raw(), 0, y.raw(), 0, x.numel());
    if (mask) std::fill(mask, mask + x.numel(), uint8_t{1});
    return Status::ok();
  }
  auto gen = make_gen(p);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double scale = 1.0 / (1.0 - ratio);
  ops::visit_any_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const bool keep = u(gen) >= ratio;
      y.data<T>()[i] = ops::from_double<T>(keep ? ops::as_double(x.data<T>()[i]) * scale : 0.0);
      if (mask) mask[i] = keep;
    }
  });
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> make_dropout(const OpContext& ctx) {
  if (!ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  TERN_ASSIGN_OR_RETURN(RandomParams p, random_params(ctx));
  TERN_ASSIGN_OR_RETURN(p.ratio, ctx.attrs().get_float("ratio", 0.5f));
  if (ctx.opset < 12) p.ratio = 0;  // is_test era: inference only
  return make_kernel("reference", p, run_dropout);
}

// ---- Bernoulli / RandomUniformLike / RandomNormalLike --------------------------------------------

Status infer_like(OpContext& ctx) {
  const DType in = ctx.inputs[0].dtype;
  TERN_ASSIGN_OR_RETURN(int64_t dt, ctx.attrs().get_int("dtype", static_cast<int64_t>(in)));
  if (!dtype_is_valid(static_cast<int32_t>(dt))) return invalid_model(ctx.where, ": bad dtype ", dt);
  ctx.set_output(0, static_cast<DType>(dt), ctx.inputs[0].shape);
  return Status::ok();
}

enum class Draw { kBernoulli, kUniform, kNormal };

template <Draw D>
Status run_draw(const RandomParams& p, const KernelArgs& a, const ExecContext&) {
  const Tensor& x = *a.inputs[0];
  Tensor& y = *a.outputs[0];
  auto gen = make_gen(p);
  std::uniform_real_distribution<double> u(D == Draw::kUniform ? p.a : 0.0,
                                           D == Draw::kUniform ? p.b : 1.0);
  std::normal_distribution<double> nd(p.a, p.b);
  for (int64_t i = 0; i < y.numel(); ++i) {
    double v = D == Draw::kNormal ? nd(gen) : u(gen);
    if (D == Draw::kBernoulli) v = v < x.float_at(i) ? 1.0 : 0.0;
    if (y.dtype() == DType::kBool) {
      y.data<uint8_t>()[i] = v != 0;
      continue;
    }
    ops::visit_all_numeric(y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      y.data<T>()[i] = ops::from_double<T>(v);
    });
  }
  return Status::ok();
}

template <Draw D>
Expected<std::unique_ptr<Kernel>> make_draw(const OpContext& ctx) {
  const DType out = ctx.outputs[0].dtype;
  if (!ops::visit_all_numeric(out, [](auto) {}) && out != DType::kBool) {
    return unsupported(ctx.where, ": random values of ", dtype_name(out));
  }
  if (D == Draw::kBernoulli && !ops::visit_any_float(ctx.inputs[0].dtype, [](auto) {})) {
    return ops::dtype_error(ctx, 0, "float types");
  }
  TERN_ASSIGN_OR_RETURN(RandomParams p, random_params(ctx));
  if (D == Draw::kUniform) {
    TERN_ASSIGN_OR_RETURN(float lo, ctx.attrs().get_float("low", 0.0f));
    TERN_ASSIGN_OR_RETURN(float hi, ctx.attrs().get_float("high", 1.0f));
    p.a = lo, p.b = hi;
  } else if (D == Draw::kNormal) {
    TERN_ASSIGN_OR_RETURN(float mean, ctx.attrs().get_float("mean", 0.0f));
    TERN_ASSIGN_OR_RETURN(float scale, ctx.attrs().get_float("scale", 1.0f));
    p.a = mean, p.b = scale;
  }
  return make_kernel("reference", p, run_draw<D>);
}

}  // namespace

TERN_REGISTRATION void register_op_random(OpRegistry& r) {
  r.add({"Dropout", 1, 3, 1, 2, infer_dropout, make_dropout, {}, attrs("ratio, seed")});
  r.add(
      {"Bernoulli", 1, 1, 1, 1, infer_like, make_draw<Draw::kBernoulli>, {}, attrs("dtype, seed")});
  r.add({"RandomUniformLike",
         1,
         1,
         1,
         1,
         infer_like,
         make_draw<Draw::kUniform>,
         {},
         attrs("dtype, high, low, seed")});
  r.add({"RandomNormalLike",
         1,
         1,
         1,
         1,
         infer_like,
         make_draw<Draw::kNormal>,
         {},
         attrs("dtype, mean, scale, seed")});
}

}  // namespace tern
