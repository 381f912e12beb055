#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/gemma_elementwise.hpp"
#include "kernels/cpu/isa.hpp"

namespace troupe::kernels::cpu {
namespace {

std::vector<float> rand_vec(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Elementwise, RmsNorm) {
  const int64_t dim = 576, n = 3;
  auto x = rand_vec(dim * n, 1), w = rand_vec(dim, 2);
  std::vector<float> out(x.size());
  rms_norm(x.data(), w.data(), n, dim, 1e-5f, out.data());
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
    const double s = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i) ASSERT_NEAR(out[t * dim + i], x[t * dim + i] * s * w[i], 1e-5);
  }
  rms_norm(x.data(), nullptr, n, dim, 1e-5f, x.data());  // aliasing, no weight
  double ss = 0;
  for (int64_t i = 0; i < dim; ++i) ss += double(x[i]) * x[i];
  EXPECT_NEAR(ss / dim, 1.0, 1e-4);
}

TEST(Elementwise, RopeNormalAndNeox) {
  const int heads = 2, hd = 8;
  const int32_t pos[2] = {0, 5};
  auto x = rand_vec(2 * heads * hd, 3);
  for (bool neox : {false, true}) {
    auto y = x;
    rope(y.data(), pos, 2, heads, hd, 10000.0f, neox);
    for (int i = 0; i < heads * hd; ++i) EXPECT_EQ(y[i], x[i]);  // position 0: identity
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        const int a = (heads + h) * hd + (neox ? i : 2 * i);
        const int b = (heads + h) * hd + (neox ? i + hd / 2 : 2 * i + 1);
        const double ang = 5.0 * std::pow(10000.0, -2.0 * i / hd);
        EXPECT_NEAR(y[a], x[a] * std::cos(ang) - x[b] * std::sin(ang), 1e-5);
        EXPECT_NEAR(y[b], x[a] * std::sin(ang) + x[b] * std::cos(ang), 1e-5);
      }
  }
}

// Uniform factors F turn position p by what plain RoPE turns p / F; mscale scales both outputs;
// a per-pair factor changes only its own pair.
TEST(Elementwise, RopeFreqFactors) {
  const int heads = 3, hd = 16;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(4 * heads * hd));
  for (auto& v : x) v = u(rng);
  for (bool neox : {false, true}) {
    const int32_t pos[4] = {0, 4, 12, 40000}, quarter[4] = {0, 1, 3, 10000};
    const std::vector<float> four(hd / 2, 4.0f);
    auto scaled = x, plain = x;
    rope_freq_factors(scaled.data(), pos, 4, heads, hd, 500000.0f, neox, four.data(), 0.5f);
    rope(plain.data(), quarter, 4, heads, hd, 500000.0f, neox);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(scaled[i], 0.5f * plain[i], 1e-6f) << i;
    std::vector<float> one_pair(hd / 2, 1.0f);
    one_pair[3] = 8.0f;
    auto a = x, b = x;
    rope_freq_factors(a.data(), pos, 4, heads, hd, 10000.0f, neox, one_pair.data(), 1.0f);
    rope(b.data(), pos, 4, heads, hd, 10000.0f, neox);
    for (int64_t t = 0; t < 4 * heads; ++t)
      for (int i = 0; i < hd / 2; ++i) {
        const int64_t e0 = t * hd + (neox ? i : 2 * i), e1 = t * hd + (neox ? i + hd / 2 : 2 * i + 1);
        if (i == 3 && t >= heads) {  // pair 3 of every token but position 0 turned differently
          EXPECT_GT(std::fabs(a[e0] - b[e0]) + std::fabs(a[e1] - b[e1]), 1e-4f) << t;
        } else {
          EXPECT_EQ(a[e0], b[e0]) << t << " " << i;
          EXPECT_EQ(a[e1], b[e1]) << t << " " << i;
        }
      }
  }
}

TEST(Elementwise, SiluMulAddDotAxpy) {
  const int64_t n = 37;  // not a multiple of 8: exercises tails
  auto g = rand_vec(n, 4), u = rand_vec(n, 5);
  std::vector<float> out(n);
  silu_mul(g.data(), u.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-6);

  double ref = 0;
  for (int64_t i = 0; i < n; ++i) ref += double(g[i]) * u[i];
  EXPECT_NEAR(dot_f32(g.data(), u.data(), n), ref, 1e-5);
  EXPECT_EQ(dot_f32(g.data(), u.data(), 0), 0.0f);

  auto y = u;
  axpy_f32(0.5f, g.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], u[i] + 0.5f * g[i], 1e-6);
  y = u;
  add_inplace(y.data(), g.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], u[i] + g[i]);
}

TEST(Elementwise, Softmax) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, -std::numeric_limits<float>::infinity(), 1000.0f};
  softmax_inplace(x.data(), 5);
  double sum = 0;
  for (float v : x) {
    sum += v;
    EXPECT_TRUE(std::isfinite(v));
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(x[4], 1.0f, 1e-6);
  EXPECT_EQ(x[3], 0.0f);
  std::vector<float> y = {0.0f, std::log(3.0f)};
  softmax_inplace(y.data(), 2);
  EXPECT_NEAR(y[0], 0.25f, 1e-6);
  EXPECT_NEAR(y[1], 0.75f, 1e-6);
  std::vector<float> masked(3, -std::numeric_limits<float>::infinity());
  softmax_inplace(masked.data(), 3);
  for (float v : masked) EXPECT_NEAR(v, 1.0f / 3, 1e-6);
}

// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), against double precision on
// the active ISA's kernel (the vector one computes x * sigmoid(2u)): small, large and
// saturating inputs, a length with a tail, and gelu_tanh in place.
TEST(Elementwise, GeluTanhMatchesDoublePrecision) {
  std::vector<float> x, up;
  for (int i = -2000; i <= 2000; ++i) x.push_back(static_cast<float>(i) * 0.0125f);  // [-25, 25]
  for (float v : {-100.0f, -40.0f, -9.5f, 1e-30f, -1e-30f, 1e-6f, -3e-5f, 40.0f, 100.0f, 0.0f}) x.push_back(v);
  x.push_back(3.0f);  // 4012 elements: not a multiple of 8
  for (size_t i = 0; i < x.size(); ++i) up.push_back(0.5f + static_cast<float>(i % 7) * 0.25f);
  // 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)): the same function without the cancellation near -1.
  auto ref = [](double v) { return v / (1.0 + std::exp(-2.0 * 0.7978845608028654 * (v + 0.044715 * v * v * v))); };
  std::vector<float> mul(x.size()), alone(x.begin(), x.end());
  gelu_tanh_mul(x.data(), up.data(), static_cast<int64_t>(x.size()), mul.data());
  gelu_tanh(alone.data(), static_cast<int64_t>(alone.size()), alone.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = ref(x[i]);
    // A few ulp of the result, or of x where 1 + tanh(u) cancels (the scalar kernel's form).
    const double tol = 4e-7 * std::fabs(r) + 6e-8 * std::fabs(x[i]);
    ASSERT_NEAR(alone[i], r, tol) << "x = " << x[i] << " got " << alone[i] << " want " << r << ", isa " << to_string(active_isa());
    ASSERT_NEAR(mul[i], r * up[i], tol * up[i] * 2) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

#if defined(__x86_64__)
namespace troupe::kernels::cpu {
namespace {

// The AVX2 vector exp (attention weights, SiLU) within 2 ulp of exp wherever the result is
// a normal float; 0 below, +inf above, exp(-inf) = 0.
TEST(Elementwise, VectorExpIsWithinTwoUlp) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x;
  for (float v = -87.3f; v < 88.7f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 0.5f, -0.5f, 1.0f, 88.0f, -87.0f}) x.push_back(v);
  std::vector<float> y(x.size());
  exp_avx2(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x[i])));
    int32_t a, b;
    std::memcpy(&a, &y[i], 4);
    std::memcpy(&b, &want, 4);
    worst = std::max(worst, std::abs(a - b));
    ASSERT_LE(std::abs(a - b), 2) << "exp(" << x[i] << ") = " << y[i] << ", want " << want;
  }
  std::printf("vector exp: at most %d ulp from exp over %zu points\n", worst, x.size());
  const float edges[5] = {-std::numeric_limits<float>::infinity(), -200.0f, 200.0f,
                          std::numeric_limits<float>::infinity(), -90.0f};
  float out[5];
  exp_avx2(edges, out, 5);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[4], 0.0f);
}

}  // namespace
}  // namespace troupe::kernels::cpu
#endif
