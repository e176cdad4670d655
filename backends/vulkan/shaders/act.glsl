// Activation steps (codes as in backends/vulkan/ops/vulkan_ops.h Act) shared by the unary,
// convolution and GEMM shaders. A chain is packed in one uint, 8 bits per step (0 ends it), with
// two float parameters per step.
float erf_approx(float x) {  // Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
  const float s = sign(x);
  x = abs(x);
  const float t = 1.0 / (1.0 + 0.3275911 * x);
  const float y =
      1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
             0.254829592) * t * exp(-x * x);
  return s * y;
}

float tanh_safe(float x) {
  const float e = exp(-2.0 * abs(x));
  return sign(x) * (1.0 - e) / (1.0 + e);
}

float softplus(float x) {
  return x > 20.0 ? x : log(1.0 + exp(x));
}

float act1(uint code, float x, float a, float b) {
  switch (code) {
    case 1u: return max(x, 0.0);
    case 2u: return x >= 0.0 ? x : a * x;
    case 3u: return min(max(x, a), b);
    case 4u: return 1.0 / (1.0 + exp(-x));
    case 5u: return clamp(a * x + b, 0.0, 1.0);
    case 6u: return x * clamp(x / 6.0 + 0.5, 0.0, 1.0);
    case 7u: return tanh_safe(x);
    case 8u: return x * a + b;
    case 9u: return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752));
    case 10u: return erf_approx(x);
    case 11u: return sqrt(x);
    case 12u: return exp(x);
    case 13u: return log(x);
    case 14u: return -x;
    case 15u: return abs(x);
    case 16u: return 1.0 / x;
    case 17u: return softplus(x);
    case 18u: return x >= 0.0 ? x : a * (exp(x) - 1.0);
    case 19u: return ceil(x);
    case 20u: return floor(x);
    case 21u: return roundEven(x);
    case 22u: return sin(x);
    case 23u: return cos(x);
    case 24u: return sign(x);
    case 25u: return x > 0.0 ? b * x : b * a * (exp(x) - 1.0);
    case 26u: return x * tanh_safe(softplus(x));
    case 27u: return x / (1.0 + exp(-a * x));
    default: return x;
  }
}

// apply_acts(x): the push-constant block's chain `p.acts` with parameters `p.ap[6]`.
#define DEFINE_APPLY_ACTS                                               \
  float apply_acts(float x) {                                           \
    for (uint k = 0u; k < 3u; ++k) {                                    \
      const uint c = (p.acts >> (8u * k)) & 255u;                       \
      if (c == 0u) break;                                               \
      x = act1(c, x, p.ap[2u * k], p.ap[2u * k + 1u]);                   \
    }                                                                   \
    return x;                                                           \
  }
