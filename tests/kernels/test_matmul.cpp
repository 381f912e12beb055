// matmul for every weight type: AVX2 (and AVX-VNNI) vs scalar (same integers,
// so only float summation order differs; none for the 32-element block types)
// and both vs an fp64 product of the dequantized weights, within a bound
// derived from the activation rounding. Batch invariance, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/quantize.hpp"

namespace troupe::kernels::cpu {
namespace {

struct Shape {
  int64_t in, out, n_tokens;
};

struct Problem {
  std::vector<uint8_t> w;
  std::vector<float> wf;  // dequantized weights [out][in]
  std::vector<float> x;   // [n_tokens][in]
};

Problem make_problem(DType type, const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Problem p;
  std::vector<float> raw(static_cast<size_t>(s.in * s.out));
  for (auto& v : raw) v = dist(rng);
  const int64_t rb = row_bytes(type, s.in);
  p.w.resize(static_cast<size_t>(rb * s.out));
  p.wf.resize(raw.size());
  for (int64_t o = 0; o < s.out; ++o) {
    quantize_row_reference(type, raw.data() + o * s.in, p.w.data() + o * rb, s.in);
    dequantize_row(type, p.w.data() + o * rb, p.wf.data() + o * s.in, s.in);
  }
  p.x.resize(static_cast<size_t>(s.in * s.n_tokens));
  for (auto& v : p.x) v = dist(rng) * (1.0f + 3.0f * (dist(rng) > 0.9f));  // some outliers
  return p;
}

bool quantized_acts(DType t) { return t != DType::f32 && t != DType::f16 && t != DType::bf16; }
int64_t act_block(DType t) { return traits(t).block_elems == 256 ? 256 : 32; }

struct Case {
  DType type;
  Shape shape;
};

std::string case_name(const Case& c) {
  return std::string(to_string(c.type)) + "_in" + std::to_string(c.shape.in) + "_out" + std::to_string(c.shape.out) +
         "_t" + std::to_string(c.shape.n_tokens);
}

class Matmul : public ::testing::TestWithParam<Case> {};

TEST_P(Matmul, MatchesFp64ReferenceOnEveryIsa) {
  const auto [type, s] = GetParam();
  const Problem p = make_problem(type, s, 1234u + static_cast<uint32_t>(s.in * 7 + s.out));
  ThreadPool pool(3);
  std::vector<float> y_scalar(static_cast<size_t>(s.out * s.n_tokens), NAN);
  matmul_with_isa(Isa::scalar, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, y_scalar.data(), &pool);

  std::vector<float> y_avx2, y_vnni;
  if (isa_available(Isa::avx2)) {
    y_avx2.assign(y_scalar.size(), NAN);
    matmul_with_isa(Isa::avx2, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, y_avx2.data(), &pool);
  }
  if (isa_available(Isa::avx2_vnni)) {
    y_vnni.assign(y_scalar.size(), NAN);
    matmul_with_isa(Isa::avx2_vnni, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, y_vnni.data(), &pool);
    EXPECT_EQ(y_vnni, y_avx2) << "VNNI changes only how the same integers are summed";
  }
  if (isa_available(Isa::avx512_vnni) && !y_avx2.empty()) {
    std::vector<float> y_512(y_scalar.size(), NAN);
    matmul_with_isa(Isa::avx512_vnni, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, y_512.data(), &pool);
    EXPECT_EQ(y_512, y_avx2) << "512-bit VNNI changes only how the same integers are summed";
  }
  std::vector<float> y_single(y_scalar.size(), NAN);  // default ISA, no pool
  matmul(type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, y_single.data(), nullptr);

  const int64_t ab = act_block(type);
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const float* x = p.x.data() + t * s.in;
    for (int64_t o = 0; o < s.out; ++o) {
      const float* w = p.wf.data() + o * s.in;
      double ref = 0, mag = 0, act_bound = 0;
      for (int64_t i = 0; i < s.in; ++i) {
        ref += static_cast<double>(w[i]) * x[i];
        mag += std::fabs(static_cast<double>(w[i]) * x[i]);
      }
      if (quantized_acts(type)) {
        // |x - dequant(quant(x))| <= amax_block / 254 per element.
        for (int64_t b0 = 0; b0 < s.in; b0 += ab) {
          double amax = 0, wsum = 0;
          for (int64_t i = b0; i < b0 + ab; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
          for (int64_t i = b0; i < b0 + ab; ++i) wsum += std::fabs(static_cast<double>(w[i]));
          act_bound += wsum * amax / 254.0;
        }
      }
      const double tol_ref = act_bound * 1.001 + 2e-6 * mag + 1e-6;
      const double tol_isa = 2e-6 * mag + 1e-6;
      const size_t k = static_cast<size_t>(t * s.out + o);
      ASSERT_NEAR(y_scalar[k], ref, tol_ref) << "scalar t=" << t << " o=" << o;
      ASSERT_NEAR(y_single[k], y_scalar[k], tol_isa) << "single-thread t=" << t << " o=" << o;
      if (!y_avx2.empty()) {
        ASSERT_NEAR(y_avx2[k], y_scalar[k], tol_isa) << "avx2 t=" << t << " o=" << o;
      }
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<Shape> shapes = {{256, 1, 1},  {256, 7, 1},   {512, 33, 3},  {768, 17, 17},
                                     {256, 9, 70}, {512, 130, 5}, {1536, 6, 4},  {256, 64, 33},
                                     {256, 200, 32}, {1024, 120, 32}};  // batched tiles: chunks of rows, passes of blocks
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0,
                  DType::q5_1, DType::q4_k, DType::q6_k, DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl,
                  DType::iq4_xs, kMxfp4})
    for (const auto& s : shapes) out.push_back({t, s});
  // 32-block types also at widths that are not multiples of 256; float types with tails.
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, kMxfp4})
    out.push_back({t, {96, 5, 2}});
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    out.push_back({t, {43, 5, 3}});
    out.push_back({t, {3, 2, 1}});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Matmul, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return case_name(info.param); });

TEST(Matmul, IsaNameIsKnown) {
  const std::string name = isa_name();
  EXPECT_TRUE(name == "avx512_vnni" || name == "avx2_vnni" || name == "avx2" || name == "scalar") << name;
}

TEST(Matmul, PoolSizesGiveTheSameResult) {
  const Shape s{576, 203, 9};
  const Problem p = make_problem(DType::q4_1, s, 99);
  std::vector<float> ref(static_cast<size_t>(s.out * s.n_tokens));
  matmul(DType::q4_1, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, ref.data(), nullptr);
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    std::vector<float> y(ref.size());
    matmul(DType::q4_1, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, y.data(), &pool);
    EXPECT_EQ(y, ref) << threads << " threads";  // rows are independent: bit-identical
  }
}

// Tensor parallelism reads a column slice of a weight in place: rows keep the full matrix's
// stride. Same blocks, same kernel: bit-identical to the slice copied out contiguously.
TEST(Matmul, AColumnSliceReadInPlaceEqualsItsContiguousCopy) {
  for (DType type : {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                     DType::q8_0, DType::q4_k, DType::q6_k, DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl,
                     DType::iq4_xs, kMxfp4}) {
    const DTypeTraits tr = traits(type);
    const int64_t block = quantized_acts(type) ? act_block(type) : 32;
    const Shape full{4 * block, 37, 5};
    const Problem p = make_problem(type, full, 3);
    const int64_t c0 = block, c1 = 3 * block;  // the middle two blocks of each row
    const int64_t stride = row_bytes(type, full.in), slice_bytes = row_bytes(type, c1 - c0);
    const uint8_t* first = p.w.data() + c0 / tr.block_elems * tr.block_bytes;
    std::vector<uint8_t> copy(static_cast<size_t>(slice_bytes * full.out));
    for (int64_t o = 0; o < full.out; ++o)
      std::copy_n(first + o * stride, slice_bytes, copy.data() + o * slice_bytes);
    for (int64_t n_tokens : {int64_t{1}, full.n_tokens}) {
      for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
        if (!isa_available(isa)) continue;
        SCOPED_TRACE(std::string(tr.name) + " " + std::to_string(n_tokens) + " tokens, isa " +
                     std::to_string(static_cast<int>(isa)));
        std::vector<float> x(static_cast<size_t>((c1 - c0) * n_tokens));
        for (int64_t t = 0; t < n_tokens; ++t)
          std::copy_n(p.x.data() + t * full.in + c0, c1 - c0, x.data() + t * (c1 - c0));
        std::vector<float> in_place(static_cast<size_t>(full.out * n_tokens)), copied(in_place.size());
        matmul_with_isa(isa, type, first, c1 - c0, full.out, x.data(), n_tokens, in_place.data(), nullptr, stride);
        matmul_with_isa(isa, type, copy.data(), c1 - c0, full.out, x.data(), n_tokens, copied.data(), nullptr);
        EXPECT_EQ(in_place, copied);
      }
    }
  }
}

// A token's output never depends on the batch it is computed in: every token of
// batches of 1..70 tokens (whole and partial lane groups, per-token tails, token
// chunks) equals that token computed alone, bit for bit, on every ISA and pool size.
TEST(Matmul, EveryTokenAloneEqualsItsRowInAnyBatch) {
  for (DType type : {DType::q4_1, DType::q8_0, DType::q4_0, DType::q5_0, DType::q5_1, DType::q4_k, DType::q6_k,
                     DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl, DType::iq4_xs, kMxfp4, DType::f16,
                     DType::f32}) {
    const Shape s{512, 27, 70};
    const Problem p = make_problem(type, s, 11);
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
      if (!isa_available(isa)) continue;
      std::vector<float> alone(static_cast<size_t>(s.out * s.n_tokens));
      for (int64_t t = 0; t < s.n_tokens; ++t)
        matmul_with_isa(isa, type, p.w.data(), s.in, s.out, p.x.data() + t * s.in, 1, alone.data() + t * s.out,
                        nullptr);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (int64_t n : {2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 31, 33, 36, 50, 64, 65, 70}) {
          for (int64_t first : {int64_t{0}, s.n_tokens - n}) {
            SCOPED_TRACE(std::string(to_string(type)) + " isa " + to_string(isa) + ", " + std::to_string(threads) +
                         " threads, tokens [" + std::to_string(first) + ", " + std::to_string(first + n) + ")");
            std::vector<float> y(static_cast<size_t>(s.out * n));
            matmul_with_isa(isa, type, p.w.data(), s.in, s.out, p.x.data() + first * s.in, n, y.data(), &pool);
            ASSERT_TRUE(std::equal(y.begin(), y.end(), alone.begin() + first * s.out));
          }
        }
      }
    }
  }
}

// The 32-element block types compute the same operations on every ISA (matmul_impl.hpp).
TEST(Matmul, ThirtyTwoBlockTypesAreBitIdenticalAcrossIsas) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (DType type : {DType::q4_1, DType::q8_0, DType::q4_0, DType::q5_0, DType::q5_1, DType::iq4_nl, kMxfp4}) {
    // Row counts past one 16-row tile, and 2..12 tokens alone or after a group (rows in lanes).
    for (const Shape& s : {Shape{576, 37, 1}, Shape{576, 37, 13}, Shape{96, 9, 40}, Shape{576, 21, 32},
                           Shape{1536, 13, 52}, Shape{576, 67, 12}, Shape{160, 48, 7}, Shape{576, 35, 28},
                           Shape{1536, 40, 2}, Shape{1024, 48, 1}, Shape{608, 33, 1}, Shape{160, 32, 1},
                           Shape{224, 17, 1}}) {
      const Problem p = make_problem(type, s, 5);
      std::vector<float> a(static_cast<size_t>(s.out * s.n_tokens)), b(a.size());
      matmul_with_isa(Isa::scalar, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, a.data(), nullptr);
      for (Isa isa : {Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
        if (!isa_available(isa)) continue;
        matmul_with_isa(isa, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, b.data(), nullptr);
        EXPECT_EQ(a, b) << to_string(type) << " " << s.n_tokens << " tokens, isa " << to_string(isa);
      }
    }
  }
}

// Q4_0, Q5_0 and IQ4_NL meet 8-bit activations through byte products (vpmaddubsw on
// AVX2, vpdpbusd on the VNNI ISAs) of their levels made unsigned by an offset (IQ4_NL:
// + 128, up to 241; plain AVX2 multiplies those signed instead). At the extremes
// (every level at its top or bottom, every activation level +-127, runs of equal signs)
// no pair sum may saturate, and every ISA must agree with the scalar kernel and with the
// exact integer sum.
TEST(Matmul, EightBitActivationTypesAreExactAtTheExtremes) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  struct Extreme {
    DType type;
    uint8_t byte;  // every quant byte of every block
    int level;     // the signed level each element then has
  };
  for (const Extreme& e : {Extreme{DType::q4_0, 0xff, 7}, Extreme{DType::q4_0, 0x00, -8},
                           Extreme{DType::q5_0, 0xff, 15}, Extreme{DType::q5_0, 0x00, -16},
                           Extreme{DType::iq4_nl, 0xff, 113}, Extreme{DType::iq4_nl, 0x00, -127},
                           Extreme{kMxfp4, 0x77, 12}, Extreme{kMxfp4, 0xff, -12}}) {
    const DType type = e.type;
    for (int signs = 0; signs < 3; ++signs) {  // mixed, all +1, all -1
      for (const Shape& s : {Shape{64, 11, 1}, Shape{256, 9, 5}, Shape{128, 8, 16}, Shape{96, 13, 37},
                             Shape{160, 35, 1}}) {
        SCOPED_TRACE(std::string(to_string(type)) + " level " + std::to_string(e.level) + " signs " +
                     std::to_string(signs) + ", " + std::to_string(s.n_tokens) + " tokens");
        Problem p = make_problem(type, s, 9);
        const int64_t bb = traits(type).block_bytes;
        const int64_t scale_bytes = type == kMxfp4 ? 1 : 2;  // MXFP4: one E8M0 byte, the others an f16
        for (size_t i = 0; i < p.w.size(); ++i)
          if (static_cast<int64_t>(i) % bb >= scale_bytes) p.w[i] = e.byte;  // d kept
        for (size_t i = 0; i < p.x.size(); ++i)
          p.x[i] = signs == 1 ? 1.0f : signs == 2 ? -1.0f : (i * 7919) % 3 == 0 ? -1.0f : 1.0f;
        std::vector<float> a(static_cast<size_t>(s.out * s.n_tokens)), b(a.size());
        matmul_with_isa(Isa::scalar, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, a.data(), nullptr);
        // Exact: the level times +-127 per element, per block.
        const int64_t rb = row_bytes(type, s.in);
        for (int64_t t = 0; t < s.n_tokens; ++t) {
          for (int64_t o = 0; o < s.out; ++o) {
            float acc = 0.0f;
            for (int64_t blk = 0; blk < s.in / kQK; ++blk) {
              int sum = 0;
              for (int64_t j = 0; j < kQK; ++j)
                sum += p.x[static_cast<size_t>(t * s.in + blk * kQK + j)] > 0 ? 127 : -127;
              const uint8_t* block = p.w.data() + o * rb + blk * bb;
              uint16_t dh;
              std::memcpy(&dh, block, 2);
              const float d = type == kMxfp4 ? e8m0_half(block[0]) : fp16_to_fp32(dh);
              acc = std::fma(static_cast<float>(e.level * sum), d * (1.0f / 127.0f), acc);
            }
            ASSERT_EQ(a[static_cast<size_t>(t * s.out + o)], acc) << "t=" << t << " o=" << o;
          }
        }
        for (Isa isa : {Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
          if (!isa_available(isa)) continue;
          matmul_with_isa(isa, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, b.data(), nullptr);
          EXPECT_EQ(a, b) << "isa " << to_string(isa);
        }
      }
    }
  }
}

// The K-quants reduce each super-block to exact integers before the same fma steps on
// every ISA (matmul_impl.hpp): scalar, AVX2, AVX-VNNI and AVX-512 VNNI agree bit for
// bit, on random weights and on weights at the extremes of their levels and scales, for
// every tile shape (1, 2..3, 4..7 and 8+ tokens, groups of 16; row and token tails; the
// 16-row decode tiles of AVX-512 for 1 to 4 tokens, also after a group of 16).
TEST(Matmul, GroupScaledKQuantsAreBitIdenticalAcrossIsas) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (DType type : {DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_xs}) {
    for (const Shape& s : {Shape{256, 9, 1}, Shape{768, 13, 5}, Shape{1536, 6, 4}, Shape{512, 5, 70},
                           Shape{512, 17, 2}, Shape{256, 8, 3}, Shape{512, 24, 11}, Shape{256, 16, 1},
                           Shape{256, 7, 33}, Shape{768, 11, 16}, Shape{768, 33, 1}, Shape{512, 32, 3},
                           Shape{1024, 48, 4}, Shape{256, 40, 17}}) {
      Problem p = make_problem(type, s, 17);
      for (int extreme = 0; extreme < 2; ++extreme) {
        if (extreme == 1) {  // a quarter of the code and scale bytes all ones (the f16 fields kept)
          const DTypeTraits tr = traits(type);
          const int64_t f16_at = type == DType::q2_k ? 80 : type == DType::q3_k ? 108 : type == DType::q6_k ? 208 : 0;
          const int64_t f16_len = type == DType::q2_k || type == DType::q4_k || type == DType::q5_k ? 4 : 2;
          std::mt19937 rng(3);
          for (size_t i = 0; i < p.w.size(); ++i) {
            const int64_t in_block = static_cast<int64_t>(i) % tr.block_bytes;
            if ((in_block < f16_at || in_block >= f16_at + f16_len) && rng() % 4 == 0) p.w[i] = 0xff;
          }
          for (auto& v : p.x) v = (v > 0 ? 1.0f : -1.0f);  // |activation levels| all 127
        }
        std::vector<float> a(static_cast<size_t>(s.out * s.n_tokens)), b(a.size());
        matmul_with_isa(Isa::scalar, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, a.data(), nullptr);
        for (Isa isa : {Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
          if (!isa_available(isa)) continue;
          matmul_with_isa(isa, type, p.w.data(), s.in, s.out, p.x.data(), s.n_tokens, b.data(), nullptr);
          for (size_t i = 0; i < a.size(); ++i)
            ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0)
                << to_string(type) << " " << s.n_tokens << " tokens, isa " << to_string(isa) << " extreme "
                << extreme << " at " << i << ": " << a[i] << " vs " << b[i];
        }
      }
    }
  }
}

// One pass over several matrices (q, k, v; gate and up) gives each matrix's matmul bit for bit,
// with mixed activation formats, row strides and pool sizes.
TEST(Matmul, MultiAndSiluMulEqualSeparateCalls) {
  const int64_t in = 512;
  const DType types[3] = {DType::q4_1, DType::q6_k, DType::f16};
  const int64_t outs[3] = {37, 16, 9};
  std::vector<Problem> probs;
  for (int j = 0; j < 3; ++j) probs.push_back(make_problem(types[j], {in, outs[j], 13}, 20 + j));
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
    if (!isa_available(isa)) continue;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t n : {1, 5, 13}) {
        SCOPED_TRACE(std::string("isa ") + to_string(isa) + ", " + std::to_string(threads) + " threads, " +
                     std::to_string(n) + " tokens");
        const float* x = probs[0].x.data();
        std::vector<float> sep[3], multi[3];
        MatmulJob jobs[3];
        for (int j = 0; j < 3; ++j) {
          sep[j].resize(static_cast<size_t>(outs[j] * n));
          multi[j].resize(sep[j].size());
          matmul_with_isa(isa, types[j], probs[j].w.data(), in, outs[j], x, n, sep[j].data(), &pool);
          jobs[j] = {types[j], probs[j].w.data(), outs[j], multi[j].data()};
        }
        matmul_multi_with_isa(isa, jobs, 3, in, x, n, &pool);
        for (int j = 0; j < 3; ++j) EXPECT_EQ(multi[j], sep[j]) << "matrix " << j;

        // gate = matrix 0, up = matrix 0 of another problem with the same shape.
        const Problem up = make_problem(types[0], {in, outs[0], 1}, 77);
        std::vector<float> g(sep[0]), u(sep[0].size()), want(sep[0].size());
        matmul_with_isa(isa, types[0], up.w.data(), in, outs[0], x, n, u.data(), &pool);
        silu_mul(g.data(), u.data(), static_cast<int64_t>(g.size()), want.data());
        std::vector<float> fused(want.size()), scratch(want.size());
        matmul_silu_mul_with_isa(isa, {types[0], probs[0].w.data(), outs[0], fused.data()},
                                 {types[0], up.w.data(), outs[0], scratch.data()}, in, x, n, &pool);
        EXPECT_EQ(fused, want);
      }
    }
  }
}

TEST(MatmulDeathTest, BadShapesAreInvariantViolations) {
  std::vector<uint8_t> w(4096);
  std::vector<float> x(100), y(100);
  EXPECT_DEATH(matmul(DType::q4_1, w.data(), 40, 2, x.data(), 1, y.data(), nullptr), "whole number of blocks");
  EXPECT_DEATH(matmul(DType::q4_1, w.data(), 32, 2, x.data(), 0, y.data(), nullptr), "empty shape");
  EXPECT_DEATH(matmul(DType::q8_1, w.data(), 32, 2, x.data(), 1, y.data(), nullptr), "unsupported");
  EXPECT_DEATH(matmul(DType::f32, w.data(), 32, 2, x.data(), 1, y.data(), nullptr, 64), "row stride");
}

// Both ISAs must see the same integers: the vectorized activation quantizer is
// bit-identical to the scalar one, rounding ties (x.5) and zero blocks included.
TEST(ActivationQuantizer, Avx2IsBitIdenticalToScalar) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int64_t n = 32 * 64;
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  for (int64_t i = 0; i < 32; ++i) x[i] = 0.0f;                              // an all-zero block
  for (int64_t i = 32; i < 64; ++i) x[i] = static_cast<float>(i - 48) * 0.5f;  // exact ties after scaling
  x[100] = 1e30f;                                                            // one huge value
  std::vector<ActQ16> a(n / 32), b(n / 32);
  quantize_act_q16(x.data(), n, a.data());
  quantize_act_q16_avx2(x.data(), n, b.data());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].d, b[k].d) << "block " << k;
    EXPECT_EQ(a[k].s, b[k].s) << "block " << k;
    for (int j = 0; j < 32; ++j) ASSERT_EQ(a[k].qs[j], b[k].qs[j]) << "block " << k << " element " << j;
  }
  std::vector<ActQ8> c(n / 32), e(n / 32);
  quantize_act_q8(x.data(), n, c.data());
  quantize_act_q8_avx2(x.data(), n, e.data());
  for (size_t k = 0; k < c.size(); ++k) {
    EXPECT_EQ(c[k].d, e[k].d) << "q8 block " << k;
    EXPECT_EQ(c[k].sum, e[k].sum) << "q8 block " << k;
    for (int j = 0; j < 32; ++j) ASSERT_EQ(c[k].qs[j], e[k].qs[j]) << "q8 block " << k << " element " << j;
  }
  std::vector<ActQ8K> f(n / 256), g(n / 256);
  quantize_act_q8k(x.data(), n, f.data());
  quantize_act_q8k_avx2(x.data(), n, g.data());
  for (size_t k = 0; k < f.size(); ++k) {
    EXPECT_EQ(f[k].d, g[k].d) << "q8k block " << k;
    for (int j = 0; j < 16; ++j) EXPECT_EQ(f[k].bsums[j], g[k].bsums[j]) << "q8k block " << k << " sum " << j;
    for (int j = 0; j < 256; ++j) ASSERT_EQ(f[k].qs[j], g[k].qs[j]) << "q8k block " << k << " element " << j;
  }
}

TEST(ActivationQuantizer, Q8KAvx2IsBitIdenticalToScalar) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int64_t n = 256 * 16;
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  for (int64_t i = 0; i < 256; ++i) x[i] = 0.0f;                                 // an all-zero block
  for (int64_t i = 256; i < 512; ++i) x[i] = static_cast<float>(i - 384) * 0.5f;  // ties after scaling
  for (int64_t i = 512; i < 768; ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * 1e-3f;    // every level at +-127
  x[1000] = 1e30f;                                                               // one huge value
  std::vector<ActQ8K> a(n / 256), b(n / 256);
  quantize_act_q8k(x.data(), n, a.data());
  quantize_act_q8k_avx2(x.data(), n, b.data());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].d, b[k].d) << "block " << k;
    for (int g = 0; g < 16; ++g) EXPECT_EQ(a[k].bsums[g], b[k].bsums[g]) << "block " << k << " group " << g;
    for (int j = 0; j < 256; ++j) ASSERT_EQ(a[k].qs[j], b[k].qs[j]) << "block " << k << " element " << j;
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
