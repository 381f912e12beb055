// A model file whose weights hold NaN or infinity is refused when it is
// opened, naming the tensor, for float tensors and for the scales of every
// block-quantized type; the same file with finite values opens.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/source/model_source.hpp"
#include "troupe/dtype.hpp"

namespace troupe::engine {
namespace {

// Offset of one f16 scale field inside a block of `t` (see finite_weights.cpp's table,
// restated from GGUF's block layouts so the test checks it).
int scale_offset(DType t) {
  switch (t) {
    case DType::q2_k: return 82;   // dmin
    case DType::q3_k: return 108;  // d
    case DType::q6_k: return 208;  // d
    case DType::q4_k: return 2;    // dmin
    case DType::q5_1: return 2;    // m
    default: return 0;
  }
}

std::string write_model(DType type, bool poison, uint16_t bad_half, const std::string& name) {
  const int64_t ne0 = traits(type).block_elems * 2;
  const int64_t rows = 3;
  gguf::GgufBuilder b;
  b.set_string("general.architecture", "llama");
  const int64_t rb = row_bytes(type, ne0);
  EXPECT_TRUE(b.add_tensor("blk.0.ok.weight", DType::f32, 8, 2, [](uint8_t* dst, int64_t begin, int64_t end) {
                 std::memset(dst, 0, static_cast<size_t>((end - begin) * 8 * 4));
               }).ok());
  EXPECT_TRUE(b.add_tensor("blk.1.attn_q.weight", type, ne0, rows,
                           [=](uint8_t* dst, int64_t begin, int64_t end) {
                             std::memset(dst, 0, static_cast<size_t>((end - begin) * rb));
                             if (!poison || !(begin <= 2 && 2 < end)) return;
                             uint8_t* row = dst + (2 - begin) * rb;  // row 2, its second block or element
                             if (type == DType::f32) {
                               const uint32_t v = 0x7fc00000u;  // NaN
                               std::memcpy(row + 4, &v, 4);
                             } else if (type == DType::f16 || type == DType::bf16) {
                               std::memcpy(row + 2, &bad_half, 2);
                             } else {
                               std::memcpy(row + traits(type).block_bytes + scale_offset(type), &bad_half, 2);
                             }
                           })
                  .ok());
  const std::string path =
      (std::filesystem::temp_directory_path() / ("troupe_finite_" + name + ".gguf")).string();
  EXPECT_TRUE(b.write_file(path).ok());
  return path;
}

class FiniteWeights : public ::testing::TestWithParam<DType> {};

TEST_P(FiniteWeights, NonFiniteRefusedNamingTheTensorFiniteOpens) {
  const DType type = GetParam();
  const std::string tag(to_string(type));
  const std::string good = write_model(type, false, 0, tag + "_good");
  auto ok = open_model(good);
  EXPECT_TRUE(ok.ok()) << ok.status().message();
  std::filesystem::remove(good);

  const uint16_t nan_half = type == DType::bf16 ? 0x7fc0 : 0x7e00;
  const uint16_t inf_half = type == DType::bf16 ? 0xff80 : 0xfc00;  // -inf
  for (uint16_t bad : {nan_half, inf_half}) {
    if (type == DType::f32 && bad == inf_half) continue;
    const std::string path = write_model(type, true, bad, tag + "_bad");
    auto r = open_model(path);
    ASSERT_FALSE(r.ok()) << tag;
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find("blk.1.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("non-finite"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    const int64_t row_units = traits(type).quantized ? 2 : 2 * traits(type).block_elems;
    const std::string where = (traits(type).quantized ? "block " : "element ") + std::to_string(2 * row_units + 1);
    EXPECT_NE(msg.find(where), std::string::npos) << msg << " (expected " << where << ")";
    std::filesystem::remove(path);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, FiniteWeights,
                         ::testing::Values(DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q4_1,
                                           DType::q5_0, DType::q5_1, DType::q8_0, DType::q2_k, DType::q3_k,
                                           DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_nl,
                                           DType::iq4_xs),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace troupe::engine
