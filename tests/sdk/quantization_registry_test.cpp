// The weight-format registry (troupe/quantization.hpp): the built-in GGUF types are in it
// with their layouts, dtype_traits and row_bytes read it, and a plugin format registers
// once, idempotently, with an id of its own and a kernel found by name.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "troupe/named_ops/named_ops.hpp"
#include "troupe/ops.hpp"
#include "troupe/quantization.hpp"

namespace troupe {
namespace {

// A toy format: rows of int16 values after an f32 scale header.
void toy_quantize(const float* x, int64_t n, void* row) {
  const float scale = 0.5f;
  std::memcpy(row, &scale, 4);
  auto* q = static_cast<int16_t*>(static_cast<void*>(static_cast<uint8_t*>(row) + 4));
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int16_t>(x[i] / scale);
}
void toy_dequantize(const void* row, int64_t n, float* out) {
  float scale;
  std::memcpy(&scale, row, 4);
  const auto* q = reinterpret_cast<const int16_t*>(static_cast<const uint8_t*>(row) + 4);
  for (int64_t i = 0; i < n; ++i) out[i] = q[i] * scale;
}
void other_dequantize(const void*, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = 0;
}

WeightFormat toy(const char* name = "toy_int16") {
  WeightFormat f;
  f.name = name;
  f.description = "test format";
  f.block_elems = 2;
  f.block_bytes = 4;
  f.row_header_bytes = 4;
  f.dequantize_row = &toy_dequantize;
  f.quantize_row = &toy_quantize;
  return f;
}

TEST(WeightFormats, BuiltinGgufTypesAreRegisteredWithTheirLayouts) {
  const WeightFormat* q41 = weight_formats::find("q4_1");
  ASSERT_NE(q41, nullptr);
  EXPECT_EQ(q41->id, DType::q4_1);
  EXPECT_EQ(q41->block_elems, 32);
  EXPECT_EQ(q41->block_bytes, 20);
  EXPECT_EQ(q41->row_header_bytes, 0);
  EXPECT_TRUE(q41->quantized);
  EXPECT_EQ(weight_formats::find(DType::q6_k)->name, "q6_k");
  EXPECT_TRUE(weight_formats::is_builtin(DType::bf16));
  // dtype_traits comes from the registry.
  auto tr = dtype_traits(static_cast<uint32_t>(DType::q4_k));
  ASSERT_TRUE(tr.has_value());
  EXPECT_EQ(tr->name, "q4_k");
  EXPECT_EQ(tr->block_elems, 256);
  EXPECT_EQ(tr->block_bytes, 144);
  EXPECT_EQ(row_bytes(DType::q8_0, 64), 68);
  EXPECT_FALSE(dtype_traits(4).has_value());  // ggml's removed q4_2
  EXPECT_EQ(weight_formats::find("nope"), nullptr);
  // The unquantized built-ins carry a reference dequantization.
  const uint16_t half_one_and_a_half = 0x3e00, bf16_minus_two = 0xc000;
  float out = 0;
  weight_formats::find(DType::f16)->dequantize_row(&half_one_and_a_half, 1, &out);
  EXPECT_EQ(out, 1.5f);
  weight_formats::find(DType::bf16)->dequantize_row(&bf16_minus_two, 1, &out);
  EXPECT_EQ(out, -2.0f);
  // No built-in is a load-time method.
  EXPECT_TRUE(weight_formats::load_time_methods().empty());
}

TEST(WeightFormats, APluginFormatGetsAnIdAboveTheGgufTypesOnce) {
  auto id = weight_formats::register_format(toy());
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_GE(static_cast<uint32_t>(*id), weight_formats::kFirstPluginFormatId);
  EXPECT_FALSE(weight_formats::is_builtin(*id));
  auto again = weight_formats::register_format(toy());  // a plugin registering twice
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *id);
  EXPECT_EQ(weight_formats::find("toy_int16")->id, *id);
  EXPECT_EQ(weight_formats::find(*id)->name, "toy_int16");
  EXPECT_EQ(to_string(*id), "toy_int16");
  // A row: the 4-byte header, then 2-value blocks of 4 bytes.
  EXPECT_EQ(row_bytes(*id, 6), 4 + 3 * 4);
  EXPECT_EQ(row_bytes(*id, 5), -1);  // not whole blocks
  EXPECT_EQ(weight_formats::load_time_methods(), std::vector<std::string>{"toy_int16"});
  EXPECT_EQ(weight_formats::all().back()->name, "toy_int16");
  // Round trip through its functions.
  const float x[4] = {1.0f, -2.5f, 0.5f, 3.0f};
  uint8_t row[4 + 2 * 4];
  weight_formats::find(*id)->quantize_row(x, 4, row);
  float back[4];
  weight_formats::find(*id)->dequantize_row(row, 4, back);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], x[i]);
}

TEST(WeightFormats, ConflictsAndBadLayoutsAreRefused) {
  auto builtin = weight_formats::register_format(toy("q8_0"));
  ASSERT_FALSE(builtin.ok());
  EXPECT_EQ(builtin.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(builtin.status().message().find("built-in GGUF type"), std::string::npos);
  ASSERT_TRUE(weight_formats::register_format(toy()).ok());
  WeightFormat changed = toy();
  changed.dequantize_row = &other_dequantize;
  auto clash = weight_formats::register_format(changed);
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), StatusCode::invalid_argument);
  WeightFormat bad = toy("Bad-Name");
  EXPECT_EQ(weight_formats::register_format(bad).status().code(), StatusCode::invalid_argument);
  bad = toy("no_dequant");
  bad.dequantize_row = nullptr;
  EXPECT_EQ(weight_formats::register_format(bad).status().code(), StatusCode::invalid_argument);
  bad = toy("no_blocks");
  bad.block_bytes = 0;
  EXPECT_EQ(weight_formats::register_format(bad).status().code(), StatusCode::invalid_argument);
}

// An Ops that offers nothing by name (the SDK default): a platform without the kernel.
class BareOps : public Ops {
 public:
  Status check_weight_type(DType) const override { return {}; }
  void matmul(const WeightTensor&, const float*, int64_t, float*) override {}
  void embedding(const WeightTensor&, const int32_t*, int64_t, float*) override {}
  void rms_norm(const float*, const float*, int64_t, int64_t, float, float*) override {}
  void rope(float*, const int32_t*, int64_t, int, int, float, bool) override {}
  void silu_mul(const float*, const float*, int64_t, float*) override {}
  void add_inplace(float*, const float*, int64_t) override {}
  void layer_norm(const float*, const float*, const float*, int64_t, int64_t, float, float*) override {}
  void gelu(const float*, int64_t, float*) override {}
  void add_bias(float*, const float*, int64_t, int64_t) override {}
  void dense_attention(const float*, const float*, const float*, float*, const int32_t*, int, int, int, float,
                       bool) override {}
};
// One that consults the registry for its device type, as the CPU platform does.
class RegistryOps : public BareOps {
 public:
  OpFn find_op(std::string_view name) const override { return weight_formats::find_kernel("toydev", name); }
};

int matmul_calls = 0;
void toy_matmul(Ops&, const WeightTensor&, const float*, int64_t, float*) { ++matmul_calls; }

TEST(WeightFormats, KernelsAreFoundByNameAndAMissingOneIsNamed) {
  auto id = weight_formats::register_format(toy());
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(weight_formats::matmul_op_name("toy_int16"), "matmul.toy_int16.v1");
  BareOps bare;
  RegistryOps with;
  EXPECT_EQ(weight_formats::find_matmul(with, *id), nullptr);  // nothing registered yet
  ASSERT_TRUE(
      weight_formats::register_kernel("toydev", "matmul.toy_int16.v1", reinterpret_cast<OpFn>(&toy_matmul)).ok());
  EXPECT_TRUE(
      weight_formats::register_kernel("toydev", "matmul.toy_int16.v1", reinterpret_cast<OpFn>(&toy_matmul)).ok());
  EXPECT_EQ(
      weight_formats::register_kernel("toydev", "matmul.toy_int16.v1", reinterpret_cast<OpFn>(&toy_quantize)).code(),
      StatusCode::invalid_argument);
  EXPECT_EQ(weight_formats::find_kernel("otherdev", "matmul.toy_int16.v1"), nullptr);
  WeightMatmulFn fn = weight_formats::find_matmul(with, *id);
  ASSERT_NE(fn, nullptr);
  WeightTensor w;
  fn(with, w, nullptr, 0, nullptr);
  EXPECT_EQ(matmul_calls, 1);
  EXPECT_EQ(weight_formats::find_matmul(bare, *id), nullptr);
  EXPECT_EQ(weight_formats::find_matmul(with, DType::q4_0), nullptr);  // built-ins are the platform's own
  const Status no = weight_formats::no_kernel(*id, "toydev2");
  EXPECT_EQ(no.code(), StatusCode::not_supported);
  EXPECT_EQ(no.message(),
            "weight format toy_int16 has no kernel on platform toydev2 (it offers no op "
            "matmul.toy_int16.v1)");
}

}  // namespace
}  // namespace troupe
