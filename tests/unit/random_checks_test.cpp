// The conformance runner's checks of random outputs (tests/conformance/compare.h): a kernel that
// returns zeros, or keeps everything, fails them; honest draws pass.
#include <doctest/doctest.h>

#include <random>

#include "conformance/compare.h"

using namespace tern;
using namespace tern_conformance;

namespace {

Tensor f32(std::vector<float> v) {
  Tensor t = Tensor::allocate(DType::kFloat32, {static_cast<int64_t>(v.size())}).value();
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

// The probabilities of the ONNX node test test_bernoulli.
const std::vector<float> kProbs = {0.5488135f,  0.71518937f, 0.60276338f, 0.54488318f, 0.4236548f,
                                   0.64589411f, 0.43758721f, 0.891773f,   0.96366276f, 0.38344152f};

Tensor bernoulli_draw(const std::vector<float>& p, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> v;
  for (float pi : p) v.push_back(u(rng) < pi ? 1.0f : 0.0f);
  return f32(v);
}

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("random-output checks: zeros and constant outputs fail, honest draws pass") {
    const Tensor probs = f32(kProbs);
    std::string why;
    // One draw of zeros (a seeded op repeats it): probability 6.5e-6.
    CHECK_FALSE(bernoulli_statistics_match({f32(std::vector<float>(10, 0))}, probs, &why));
    CHECK(why.find("0 successes in 10 trials") != std::string::npos);
    // Twenty runs that all kept every element.
    std::vector<Tensor> ones(20, f32(std::vector<float>(10, 1)));
    CHECK_FALSE(bernoulli_statistics_match(ones, probs, &why));
    // Certain outcomes: p = 0 must give 0, p = 1 must give 1.
    CHECK_FALSE(bernoulli_statistics_match({f32({1, 0})}, f32({0, 1}), &why));
    CHECK(bernoulli_statistics_match({f32({0, 1})}, f32({0, 1}), &why));
    // Honest draws pass (1000 trials of 20 runs each; each check fails with probability < 1e-5).
    std::mt19937 rng(7);
    int failures = 0;
    for (int trial = 0; trial < 1000; ++trial) {
      std::vector<Tensor> draws;
      for (int r = 0; r < 20; ++r) draws.push_back(bernoulli_draw(kProbs, rng));
      failures += !bernoulli_statistics_match(draws, probs, &why);
      failures += !bernoulli_statistics_match({draws[0]}, probs, &why);
    }
    CHECK(failures == 0);

    // Dropout with ratio 0.75: x * 4 kept with probability 0.25, else 0.
    std::vector<float> x(60), want(60);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = 0.1f * static_cast<float>(i + 1);
      want[i] = i % 4 == 0 ? 4 * x[i] : 0;
    }
    CHECK_FALSE(
        dropout_statistics_match({f32(std::vector<float>(60, 0))}, f32(want), f32(x), &why));
    CHECK(why.find("keep probability 0.25") != std::string::npos);
    std::vector<float> all(60);
    for (size_t i = 0; i < x.size(); ++i) all[i] = 4 * x[i];
    CHECK_FALSE(dropout_statistics_match({f32(all)}, f32(want), f32(x), &why));
    CHECK(dropout_statistics_match({f32(want)}, f32(want), f32(x), &why));
  }
}
