// A load-time method over a model source (runtime/model_files/source/quantizing_source):
// which tensors it converts (2-D f16/bf16/f32 matrices, not embedding tables or the output
// head, not what is quantized already), that the converted rows hold what the method's
// quantize_row makes of the original values, and what it leaves untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/fp16.hpp"
#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/model_files/source/quantizing_source.hpp"

namespace troupe::engine {
namespace {

// A toy load-time method: an f32 row maximum as the header, then each value / max * 100
// rounded to int8.
void toy_quantize(const float* x, int64_t n, void* row) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  std::memcpy(row, &amax, 4);
  auto* q = static_cast<int8_t*>(row) + 4;
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::lround(amax > 0 ? x[i] / amax * 100 : 0));
}
void toy_dequantize(const void* row, int64_t n, float* out) {
  float amax;
  std::memcpy(&amax, row, 4);
  const auto* q = static_cast<const int8_t*>(row) + 4;
  for (int64_t i = 0; i < n; ++i) out[i] = q[i] * amax / 100;
}

const WeightFormat& toy_method() {
  static const WeightFormat* f = [] {
    WeightFormat w;
    w.name = "toy_row8";
    w.description = "test method";
    w.block_elems = 1;
    w.block_bytes = 1;
    w.row_header_bytes = 4;
    w.dequantize_row = &toy_dequantize;
    w.quantize_row = &toy_quantize;
    auto id = weight_formats::register_format(w);
    EXPECT_TRUE(id.ok()) << id.status().to_string();
    return weight_formats::find("toy_row8");
  }();
  return *f;
}

float value(int64_t r, int64_t i) { return static_cast<float>((r + 1) * (i % 5 - 2)) * 0.25f; }

std::shared_ptr<const gguf::GgufFile> model_file() {
  gguf::GgufBuilder b;
  b.set_string("general.architecture", "llama");
  auto f32 = [](int64_t ne0) {
    return [ne0](uint8_t* dst, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t i = 0; i < ne0; ++i) reinterpret_cast<float*>(dst)[(r - r0) * ne0 + i] = value(r, i);
    };
  };
  auto f16 = [](int64_t ne0) {
    return [ne0](uint8_t* dst, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t i = 0; i < ne0; ++i)
          reinterpret_cast<uint16_t*>(dst)[(r - r0) * ne0 + i] = kernels::cpu::fp32_to_fp16(value(r, i));
    };
  };
  auto bf16 = [](int64_t ne0) {
    return [ne0](uint8_t* dst, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t i = 0; i < ne0; ++i) {
          uint32_t bits;
          const float v = value(r, i);
          std::memcpy(&bits, &v, 4);
          reinterpret_cast<uint16_t*>(dst)[(r - r0) * ne0 + i] = static_cast<uint16_t>(bits >> 16);
        }
    };
  };
  EXPECT_TRUE(b.add_tensor("blk.0.attn_q.weight", DType::f16, 8, 3, f16(8)).ok());
  EXPECT_TRUE(b.add_tensor("blk.0.ffn_up.weight", DType::bf16, 8, 2, bf16(8)).ok());
  EXPECT_TRUE(b.add_tensor("blk.0.ffn_gate.weight", DType::f32, 8, 2, f32(8)).ok());
  EXPECT_TRUE(b.add_tensor("blk.0.attn_norm.weight", DType::f32, 8, 0, f32(8)).ok());
  EXPECT_TRUE(b.add_tensor("token_embd.weight", DType::f16, 8, 5, f16(8)).ok());
  EXPECT_TRUE(b.add_tensor("output.weight", DType::f32, 8, 5, f32(8)).ok());
  EXPECT_TRUE(b.add_tensor("blk.0.ffn_down.weight", DType::q8_0, 32, 2, [](uint8_t* dst, int64_t r0, int64_t r1) {
                 std::memset(dst, 0, static_cast<size_t>((r1 - r0) * 34));
               }).ok());
  auto image = b.build_in_memory(1);
  EXPECT_TRUE(image.ok()) << image.status().to_string();
  return image.ok() ? image->file : nullptr;
}

TEST(QuantizingSource, ConvertsTheMatricesAndLeavesTheRest) {
  const WeightFormat& method = toy_method();
  auto file = model_file();
  ASSERT_NE(file, nullptr);
  auto base = std::make_unique<gguf::GgufModelSource>(file);
  const gguf::GgufModelSource* raw = base.get();
  auto wrapped = quantize_at_load(std::move(base), method);
  ASSERT_TRUE(wrapped.ok()) << wrapped.status().to_string();
  const ModelSource& s = **wrapped;
  EXPECT_EQ(s.architecture(), "llama");
  EXPECT_EQ(s.get_string("general.architecture"), "llama");

  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.0.ffn_gate.weight"}) {
    SCOPED_TRACE(name);
    const WeightTensor* t = s.tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, method.id);
    EXPECT_EQ(t->name, name);
    EXPECT_EQ(t->ne[0], 8);
    EXPECT_EQ(t->nbytes, static_cast<uint64_t>(t->rows() * (4 + 8)));
    EXPECT_EQ(t->row_stride, 0);
    EXPECT_EQ(s.tensor(name), t);  // converted once, then the same tensor
    // Each row is what the method makes of the original values (all exact in f16 and bf16).
    std::vector<float> row(8);
    std::vector<uint8_t> want(12);
    for (int64_t r = 0; r < t->rows(); ++r) {
      for (int64_t i = 0; i < 8; ++i) row[static_cast<size_t>(i)] = value(r, i);
      toy_quantize(row.data(), 8, want.data());
      EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(t->data) + r * 12, want.data(), 12), 0) << "row " << r;
    }
  }
  // Untouched: a vector, the embedding table, the output head, a matrix quantized already.
  for (const char* name : {"blk.0.attn_norm.weight", "token_embd.weight", "output.weight", "blk.0.ffn_down.weight"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(s.tensor(name), raw->tensor(name));
  }
  EXPECT_EQ(s.tensor("missing.weight"), nullptr);
}

TEST(QuantizingSource, OnlyLoadTimeMethodsWrapASource) {
  const WeightFormat& method = toy_method();
  EXPECT_EQ(load_time_method("toy_row8"), &method);
  EXPECT_EQ(load_time_method(""), nullptr);
  EXPECT_EQ(load_time_method("gguf"), nullptr);
  EXPECT_EQ(load_time_method("q4_0"), nullptr);  // a weight type, not a method
  EXPECT_EQ(load_time_method("nope"), nullptr);
  auto not_a_method =
      quantize_at_load(std::make_unique<gguf::GgufModelSource>(model_file()), *weight_formats::find("q4_0"));
  ASSERT_FALSE(not_a_method.ok());
  EXPECT_EQ(not_a_method.status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace troupe::engine
