// Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS: dequantize_row against ggml's
// dequantization as ggml-quants.c states it (its loop structure: running
// pointers, shifts and masks, written out here independently of
// kernels/cpu/block_levels.hpp), bit for bit, on blocks of random bytes with
// random finite f16 scales; plus hand-built blocks whose values are known.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/quant_blocks.hpp"
#include "kernels/cpu/quantize.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int8_t kGgmlIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// ggml's get_scale_min_k4.
void ggml_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

void ggml_q2_k(const BlockQ2_K& x, float* y) {
  const float d = fp16_to_fp32(x.d), min = fp16_to_fp32(x.dmin);
  const uint8_t* q = x.qs;
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc = x.scales[is++];
      float dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
      sc = x.scales[is++];
      dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
      shift += 2;
    }
    q += 32;
  }
}

void ggml_q3_k(const BlockQ3_K& x, float* y) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, x.scales, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  const float d_all = fp16_to_fp32(x.d);
  const uint8_t* q = x.qs;
  const uint8_t* hm = x.hmask;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      float dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
      dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
      shift += 2;
      m <<= 1;
    }
    q += 32;
  }
}

void ggml_q5_k(const BlockQ5_K& x, float* y) {
  const uint8_t* ql = x.qs;
  const uint8_t* qh = x.qh;
  const float d = fp16_to_fp32(x.d), min = fp16_to_fp32(x.dmin);
  int is = 0;
  uint8_t sc, m, u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    ggml_scale_min_k4(is + 0, x.scales, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    ggml_scale_min_k4(is + 1, x.scales, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 <<= 2;
    u2 <<= 2;
  }
}

void ggml_iq4_nl(const BlockIQ4_NL& x, float* y) {
  const float d = fp16_to_fp32(x.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kGgmlIq4[x.qs[j] & 0xf];
    y[j + 16] = d * kGgmlIq4[x.qs[j] >> 4];
  }
}

void ggml_iq4_xs(const BlockIQ4_XS& x, float* y) {
  const uint8_t* qs = x.qs;
  const float d = fp16_to_fp32(x.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((x.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x.scales_h >> 2 * ib) & 3) << 4);
    const float dl = d * (ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j + 0] = dl * kGgmlIq4[qs[j] & 0xf];
      y[j + 16] = dl * kGgmlIq4[qs[j] >> 4];
    }
    y += 32;
    qs += 16;
  }
}

// ggml-common.h b11434's kvalues_mxfp4 (E2M1 doubled) and ggml-impl.h's
// ggml_e8m0_to_fp32_half, then dequantize_row_mxfp4's loop (every byte of e, 0 and 1 too).
constexpr int8_t kGgmlMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
float ggml_e8m0_to_fp32_half(uint8_t x) {
  uint32_t bits = x < 2 ? 0x00200000u << x : static_cast<uint32_t>(x - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
void ggml_mxfp4(const BlockMXFP4& x, float* y) {
  const float d = ggml_e8m0_to_fp32_half(x.e);
  for (int j = 0; j < 16; ++j) {
    y[j] = kGgmlMxfp4[x.qs[j] & 0x0f] * d;
    y[j + 16] = kGgmlMxfp4[x.qs[j] >> 4] * d;
  }
}

// A random finite f16 of magnitude 2^-10 .. 2^4.
uint16_t random_half(std::mt19937& rng) {
  std::uniform_int_distribution<int> exp(5, 19), mant(0, 1023), sign(0, 1);
  return static_cast<uint16_t>((sign(rng) << 15) | (exp(rng) << 10) | mant(rng));
}

template <class Block>
void expect_matches_ggml(DType type, int elems, void (*ggml)(const Block&, float*), std::vector<int> half_offsets) {
  std::mt19937 rng(static_cast<uint32_t>(type) * 77u);
  std::uniform_int_distribution<int> byte(0, 255);
  constexpr int kBlocks = 64;
  std::vector<Block> blocks(kBlocks);
  for (auto& b : blocks) {
    auto* p = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) p[i] = static_cast<uint8_t>(byte(rng));
    for (int off : half_offsets) {
      const uint16_t h = random_half(rng);
      std::memcpy(p + off, &h, 2);
    }
  }
  std::vector<float> ours(static_cast<size_t>(kBlocks * elems)), theirs(ours.size());
  dequantize_row(type, blocks.data(), ours.data(), kBlocks * elems);
  for (int i = 0; i < kBlocks; ++i) ggml(blocks[i], theirs.data() + i * elems);
  for (size_t i = 0; i < ours.size(); ++i)
    ASSERT_EQ(std::memcmp(&ours[i], &theirs[i], 4), 0) << to_string(type) << " element " << i << ": " << ours[i]
                                                        << " vs ggml " << theirs[i];
}

TEST(GgmlLayout, Q2_KMatchesGgmlBitForBit) { expect_matches_ggml<BlockQ2_K>(DType::q2_k, 256, ggml_q2_k, {80, 82}); }
TEST(GgmlLayout, Q3_KMatchesGgmlBitForBit) { expect_matches_ggml<BlockQ3_K>(DType::q3_k, 256, ggml_q3_k, {108}); }
TEST(GgmlLayout, Q5_KMatchesGgmlBitForBit) { expect_matches_ggml<BlockQ5_K>(DType::q5_k, 256, ggml_q5_k, {0, 2}); }
TEST(GgmlLayout, IQ4_NLMatchesGgmlBitForBit) {
  expect_matches_ggml<BlockIQ4_NL>(DType::iq4_nl, 32, ggml_iq4_nl, {0});
}
TEST(GgmlLayout, IQ4_XSMatchesGgmlBitForBit) {
  expect_matches_ggml<BlockIQ4_XS>(DType::iq4_xs, 256, ggml_iq4_xs, {0});
}
TEST(GgmlLayout, MXFP4MatchesGgmlBitForBit) { expect_matches_ggml<BlockMXFP4>(kMxfp4, 32, ggml_mxfp4, {}); }

constexpr uint16_t kHalfOne = 0x3c00, kHalfHalf = 0x3800;

std::vector<float> deq(DType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, src, out.data(), n);
  return out;
}

// Hand-built blocks: every element gets a level chosen from its index (hashed, so
// elements that share a byte or bit position differ), packed by the layout's
// description, so a misplaced bit shows as a wrong value.
TEST(GgmlLayout, Q2_KHandBuilt) {
  BlockQ2_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>((g % 15 + 1) | ((15 - g) << 4));
  auto level = [](int e) { return static_cast<int>((static_cast<uint32_t>(e) * 2654435761u) >> 13) % 4; };
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, kl = e % 32;
    b.qs[32 * h + kl] = static_cast<uint8_t>(b.qs[32 * h + kl] | (level(e) << (2 * j)));
  }
  auto y = deq(DType::q2_k, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 16;
    EXPECT_EQ(y[e], static_cast<float>((g % 15 + 1) * level(e)) - 0.5f * static_cast<float>(15 - g)) << e;
  }
}

TEST(GgmlLayout, Q3_KHandBuilt) {
  BlockQ3_K b{};
  b.d = kHalfOne;
  int s[16];
  for (int g = 0; g < 16; ++g) s[g] = (g * 11 + 5) % 64;  // 6-bit scales, used as s - 32
  for (int g = 0; g < 16; ++g) {
    b.scales[g % 8] = static_cast<uint8_t>(b.scales[g % 8] | ((s[g] & 15) << (g < 8 ? 0 : 4)));
    b.scales[8 + g % 4] = static_cast<uint8_t>(b.scales[8 + g % 4] | ((s[g] >> 4) << (2 * (g / 4))));
  }
  for (int g = 0; g < 16; ++g) EXPECT_EQ(q3k_scale(g, b.scales), s[g]) << g;
  auto level = [](int e) { return static_cast<int>((static_cast<uint32_t>(e) * 2654435761u) >> 13) % 8 - 4; };
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, kl = e % 32, u = level(e) + 4;
    b.qs[32 * h + kl] = static_cast<uint8_t>(b.qs[32 * h + kl] | ((u & 3) << (2 * j)));
    if (u & 4) b.hmask[kl] = static_cast<uint8_t>(b.hmask[kl] | (1 << (4 * h + j)));
  }
  auto y = deq(DType::q3_k, &b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], static_cast<float>((s[e / 16] - 32) * level(e))) << e;
}

TEST(GgmlLayout, Q5_KHandBuilt) {
  BlockQ5_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) sc[j] = j + 1 + (j >= 4 ? 32 : 0), mn[j] = 10 + j + (j >= 4 ? 16 : 0);
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  auto level = [](int e) { return (e * 5 + e / 32 * 3) % 32; };  // elements e and e + 32 differ
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32, c = j / 2;
    b.qs[32 * c + l] = static_cast<uint8_t>(b.qs[32 * c + l] | ((level(e) & 15) << (4 * (j % 2))));
    b.qh[l] = static_cast<uint8_t>(b.qh[l] | ((level(e) >> 4) << j));
  }
  auto y = deq(DType::q5_k, &b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], static_cast<float>(sc[e / 32] * level(e)) - 0.5f * static_cast<float>(mn[e / 32])) << e;
}

TEST(GgmlLayout, IQ4HandBuilt) {
  BlockIQ4_NL nl{};
  nl.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) nl.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = deq(DType::iq4_nl, &nl, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * kGgmlIq4[j]);
    EXPECT_EQ(y[j + 16], 0.5f * kGgmlIq4[15 - j]);
  }
  BlockIQ4_XS xs{};
  xs.d = kHalfOne;
  int ls[8] = {0, 63, 32, 31, 33, 17, 48, 5};
  for (int j = 0; j < 8; ++j) {
    xs.scales_l[j / 2] = static_cast<uint8_t>(xs.scales_l[j / 2] | ((ls[j] & 15) << (4 * (j % 2))));
    xs.scales_h = static_cast<uint16_t>(xs.scales_h | ((ls[j] >> 4) << (2 * j)));
  }
  for (int i = 0; i < 128; ++i) xs.qs[i] = static_cast<uint8_t>((i % 16) | (((i + 5) % 16) << 4));
  auto z = deq(DType::iq4_xs, &xs, 256);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * j + l;
      EXPECT_EQ(z[32 * j + l], static_cast<float>((ls[j] - 32) * kGgmlIq4[i % 16]));
      EXPECT_EQ(z[32 * j + 16 + l], static_cast<float>((ls[j] - 32) * kGgmlIq4[(i + 5) % 16]));
    }
}

}  // namespace
}  // namespace troupe::kernels::cpu
