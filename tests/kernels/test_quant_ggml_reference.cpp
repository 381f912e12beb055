// Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS blocks made by ggml itself
// (tests/data/golden/ggml_quant_blocks.json, from gen_ggml_quant_blocks.sh: llama.cpp
// b11434's libggml-base, ggml_quantize_chunk without an importance matrix, as
// llama-quantize calls it, and ggml's to_float):
// - dequantize_row reads ggml's blocks as ggml does: equal floats (bit for bit but
//   for the sign of zero: where a negative Q3_K scale meets level 0 the formula gives
//   -0, and ggml's compiled loop +0);
// - matmul on every ISA reads them too: within the activation-rounding bound of an
//   fp64 product of ggml's dequantized rows;
// - our reference quantizer (quantize_row_reference) is no more than kWorseThanGgml
//   times ggml's error on the same rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/quantize.hpp"

namespace troupe::kernels::cpu {
namespace {

// ggml searches scales (make_qkx2_quants and friends); ours refits by least squares.
constexpr double kWorseThanGgml = 1.25;

struct Reference {
  int rows = 0, n = 0;
  std::vector<float> input;
  struct Type {
    DType type;
    std::vector<uint8_t> blocks;
    std::vector<float> dequantized;
  };
  std::vector<Type> types;
};

std::vector<uint8_t> from_hex(const std::string& s) {
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

Reference load() {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/ggml_quant_blocks.json");
  const auto j = nlohmann::json::parse(in);
  Reference r;
  r.rows = j["rows"].get<int>();
  r.n = j["n_per_row"].get<int>();
  r.input = j["input"].get<std::vector<float>>();
  for (const auto& t : j["types"])
    r.types.push_back({static_cast<DType>(t["ggml_type"].get<uint32_t>()), from_hex(t["blocks_hex"].get<std::string>()),
                       t["dequantized"].get<std::vector<float>>()});
  return r;
}

double rms_error(const std::vector<float>& a, const std::vector<float>& b, int64_t from, int64_t n) {
  double e = 0;
  for (int64_t i = from; i < from + n; ++i) e += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(e / static_cast<double>(n));
}

TEST(GgmlReference, CoversTheFiveTypes) {
  const Reference r = load();
  ASSERT_EQ(r.types.size(), 5u);
  const DType want[] = {DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl, DType::iq4_xs};
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(r.types[i].type, want[i]);
}

TEST(GgmlReference, DequantizeReadsGgmlBlocksExactly) {
  const Reference r = load();
  for (const auto& t : r.types) {
    SCOPED_TRACE(std::string(to_string(t.type)));
    const int64_t rb = row_bytes(t.type, r.n);
    ASSERT_EQ(static_cast<int64_t>(t.blocks.size()), rb * r.rows);
    std::vector<float> y(static_cast<size_t>(r.n));
    for (int row = 0; row < r.rows; ++row) {
      dequantize_row(t.type, t.blocks.data() + row * rb, y.data(), r.n);
      for (int i = 0; i < r.n; ++i)
        ASSERT_EQ(y[i], t.dequantized[static_cast<size_t>(row * r.n + i)])
            << "row " << row << " element " << i << ": " << y[i] << " vs ggml "
            << t.dequantized[static_cast<size_t>(row * r.n + i)];
    }
  }
}

TEST(GgmlReference, MatmulOnEveryIsaReadsGgmlBlocks) {
  const Reference r = load();
  const int64_t n_tokens = 5;
  std::vector<float> x(static_cast<size_t>(r.n * n_tokens));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (i % 11 == 3 ? 4.0f : 1.0f);
  for (const auto& t : r.types) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx2_vnni, Isa::avx512_vnni}) {
      if (!isa_available(isa)) continue;
      SCOPED_TRACE(std::string(to_string(t.type)) + " isa " + to_string(isa));
      std::vector<float> y(static_cast<size_t>(r.rows * n_tokens));
      matmul_with_isa(isa, t.type, t.blocks.data(), r.n, r.rows, x.data(), n_tokens, y.data(), nullptr);
      const int64_t ab = traits(t.type).block_elems;  // activation block: 32 or 256, like the weight's
      for (int64_t tok = 0; tok < n_tokens; ++tok)
        for (int row = 0; row < r.rows; ++row) {
          const float* w = t.dequantized.data() + row * r.n;
          const float* xt = x.data() + tok * r.n;
          double ref = 0, mag = 0, bound = 0;
          for (int i = 0; i < r.n; ++i) ref += static_cast<double>(w[i]) * xt[i], mag += std::fabs(w[i] * xt[i]);
          for (int64_t b0 = 0; b0 < r.n; b0 += ab) {  // |x - dequant(quant(x))| <= amax_block / 254
            double amax = 0, wsum = 0;
            for (int64_t i = b0; i < b0 + ab; ++i) amax = std::max(amax, std::fabs(static_cast<double>(xt[i])));
            for (int64_t i = b0; i < b0 + ab; ++i) wsum += std::fabs(static_cast<double>(w[i]));
            bound += wsum * amax / 254.0;
          }
          EXPECT_NEAR(y[static_cast<size_t>(tok * r.rows + row)], ref, bound * 1.001 + 2e-6 * mag + 1e-6)
              << "token " << tok << " row " << row;
        }
    }
  }
}

TEST(GgmlReference, OurQuantizerIsCloseToGgmlsError) {
  const Reference r = load();
  for (const auto& t : r.types) {
    const int64_t rb = row_bytes(t.type, r.n);
    std::vector<uint8_t> q(static_cast<size_t>(rb * r.rows));
    std::vector<float> ours(r.input.size());
    for (int row = 0; row < r.rows; ++row) {
      quantize_row_reference(t.type, r.input.data() + row * r.n, q.data() + row * rb, r.n);
      dequantize_row(t.type, q.data() + row * rb, ours.data() + row * r.n, r.n);
    }
    for (int row = 0; row < r.rows; ++row) {
      const double e_ours = rms_error(ours, r.input, row * r.n, r.n);
      const double e_ggml = rms_error(t.dequantized, r.input, row * r.n, r.n);
      std::printf("%-6s row %d: rms error ours %.5f, ggml %.5f\n", std::string(to_string(t.type)).c_str(), row, e_ours,
                  e_ggml);
      EXPECT_LE(e_ours, kWorseThanGgml * e_ggml) << to_string(t.type) << " row " << row;
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
