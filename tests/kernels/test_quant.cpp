// Block layouts (hand-built blocks with known values), fp16/bf16 conversion,
// and quantize_row_reference -> dequantize_row round trips for every type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/quant_blocks.hpp"
#include "kernels/cpu/quantize.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr uint16_t kHalfOne = 0x3c00, kHalfHalf = 0x3800, kHalfTwo = 0x4000;

TEST(Fp16, KnownValuesAndRoundTrip) {
  EXPECT_EQ(fp16_to_fp32(kHalfOne), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7c00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_EQ(fp32_to_fp16(1.0f), kHalfOne);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), kHalfOne);  // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), kHalfOne + 2);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-3.5f), 0xc060);
}

std::vector<float> deq(DType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, src, out.data(), n);
  return out;
}

TEST(Layout, Q4_0) {
  BlockQ4_0 b{};
  b.d = kHalfTwo;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = deq(DType::q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * (j - 8));
    EXPECT_EQ(y[j + 16], 2.0f * (15 - j - 8));
  }
}

TEST(Layout, Q4_1) {
  BlockQ4_1 b{};
  b.d = kHalfOne;
  b.m = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = deq(DType::q4_1, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j + 0.5f);
    EXPECT_EQ(y[j + 16], 15 - j + 0.5f);
  }
}

TEST(Layout, Q5_0AndQ5_1HighBits) {
  BlockQ5_0 b{};
  b.d = kHalfOne;
  const uint32_t bits = (1u << 3) | (1u << 20) | (1u << 31);
  std::memcpy(b.qh, &bits, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x11;  // every nibble 1
  auto y = deq(DType::q5_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], ((bits >> j) & 1) ? 17.0f - 16 : 1.0f - 16) << j;

  BlockQ5_1 c{};
  c.d = kHalfTwo;
  c.m = kHalfOne;
  std::memcpy(c.qh, &bits, 4);
  for (int j = 0; j < 16; ++j) c.qs[j] = static_cast<uint8_t>(j | (j << 4));
  auto z = deq(DType::q5_1, &c, 32);
  for (int j = 0; j < 32; ++j) {
    const int q = (j % 16) | (((bits >> j) & 1) << 4);
    EXPECT_EQ(z[j], 2.0f * q + 1.0f) << j;
  }
}

TEST(Layout, Q8_0) {
  BlockQ8_0 b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  auto y = deq(DType::q8_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * (j * 8 - 128));
}

TEST(Layout, Q4_KScalesAndNibbles) {
  BlockQ4_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  // Sub-block scales 1..8 and mins 10..17, packed as 6 bits (high pairs for j >= 4).
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) sc[j] = j + 1 + (j >= 4 ? 32 : 0), mn[j] = 10 + j + (j >= 4 ? 16 : 0);
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    int s, m;
    q4k_scale_min(j, b.scales, &s, &m);
    EXPECT_EQ(s, sc[j]);
    EXPECT_EQ(m, mn[j]);
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | (((i + 3) % 16) << 4));
  auto y = deq(DType::q4_k, &b, 256);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int i = 32 * c + l;
      EXPECT_EQ(y[64 * c + l], sc[2 * c] * (i % 16) - 0.5f * mn[2 * c]);
      EXPECT_EQ(y[64 * c + 32 + l], sc[2 * c + 1] * ((i + 3) % 16) - 0.5f * mn[2 * c + 1]);
    }
}

TEST(Layout, Q6_KInterleaving) {
  BlockQ6_K b{};
  b.d = kHalfOne;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g - 8);
  // Element e of half h gets level (e * 7 + h) % 64, packed per the layout.
  std::vector<int> want(256);
  for (int e = 0; e < 256; ++e) want[e] = (e * 7 + e / 128) % 64;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int* q = &want[128 * h];
      b.ql[64 * h + l] = static_cast<uint8_t>((q[l] & 15) | ((q[l + 64] & 15) << 4));
      b.ql[64 * h + 32 + l] = static_cast<uint8_t>((q[l + 32] & 15) | ((q[l + 96] & 15) << 4));
      b.qh[32 * h + l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) |
                                             ((q[l + 96] >> 4) << 6));
    }
  auto y = deq(DType::q6_k, &b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], static_cast<float>((e / 16 - 8) * (want[e] - 32))) << e;
}

// Round trip: the reference quantizer's error stays within each format's step.
struct RoundTripCase {
  DType type;
  double max_rel_rms;  // rms error / rms value
};

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, ErrorWithinFormatStep) {
  const auto c = GetParam();
  const int64_t n = 256 * 4;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  x[5] = 0.0f;
  std::fill(x.begin() + 512, x.begin() + 768, 0.0f);  // an all-zero block/super-block must survive
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(c.type, n)));
  quantize_row_reference(c.type, x.data(), q.data(), n);
  auto y = deq(c.type, q.data(), n);
  double err = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << i;
    err += (y[i] - x[i]) * (y[i] - x[i]);
    ref += x[i] * x[i];
  }
  for (int i = 512; i < 768; ++i) EXPECT_EQ(y[i], 0.0f) << i;
  EXPECT_LT(std::sqrt(err / ref), c.max_rel_rms) << to_string(c.type);
  EXPECT_GT(std::sqrt(err / ref), c.type == DType::f32 ? -1.0 : 0.0);  // lossy types do lose something
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip,
                         ::testing::Values(RoundTripCase{DType::f32, 1e-12}, RoundTripCase{DType::f16, 1e-3},
                                           RoundTripCase{DType::bf16, 5e-3}, RoundTripCase{DType::q8_0, 0.01},
                                           RoundTripCase{DType::q4_0, 0.15}, RoundTripCase{DType::q4_1, 0.12},
                                           RoundTripCase{DType::q5_0, 0.07}, RoundTripCase{DType::q5_1, 0.06},
                                           RoundTripCase{DType::q4_k, 0.15}, RoundTripCase{DType::q6_k, 0.04},
                                           RoundTripCase{DType::q2_k, 0.35}, RoundTripCase{DType::q3_k, 0.2},
                                           RoundTripCase{DType::q5_k, 0.05}, RoundTripCase{DType::iq4_nl, 0.1},
                                           RoundTripCase{DType::iq4_xs, 0.1}),
                         [](const auto& info) { return std::string(to_string(info.param.type)); });

TEST(Quantize, SupportsExactlyTheListedTypes) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0,
                  DType::q5_1, DType::q4_k, DType::q6_k, DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl,
                  DType::iq4_xs})
    EXPECT_TRUE(supports_type(t)) << to_string(t);
  EXPECT_FALSE(supports_type(DType::q8_1));
  EXPECT_FALSE(supports_type(DType::q8_k));
}

TEST(QuantizeDeathTest, PartialBlockIsAnInvariantViolation) {
  std::vector<float> x(40, 1.0f), y(40);
  std::vector<uint8_t> q(64);
  EXPECT_DEATH(dequantize_row(DType::q4_1, q.data(), y.data(), 40), "whole number of blocks");
}

}  // namespace
}  // namespace troupe::kernels::cpu
