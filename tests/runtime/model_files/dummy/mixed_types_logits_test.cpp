// A GGUF whose matrices mix weight types per tensor (as llama.cpp's Q3_K_M and
// Q5_K_M files do) loads and runs through the real CPU platform plugin, and its
// logits match an independent reference: the same model with every matrix
// stored as the f32 values dequantize_row gives for its blocks. The only
// difference left is the quantized activations of the integer matmuls.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "kernels/cpu/quantize.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/greedy_steps.hpp"

namespace troupe {
namespace {

// Every metadata key of `from` (troupe.dummy.* aside: they would name a single type).
void copy_metadata(const gguf::GgufFile& from, gguf::GgufBuilder& to) {
  for (const std::string& key : from.keys()) {
    if (key.rfind("troupe.dummy.", 0) == 0) continue;
    switch (*from.type_of(key)) {
      case gguf::ValueType::string: to.set_string(key, *from.get_string(key)); break;
      case gguf::ValueType::float32: to.set_f32(key, static_cast<float>(*from.get_float(key))); break;
      case gguf::ValueType::boolean: to.set_bool(key, *from.get_bool(key)); break;
      case gguf::ValueType::uint64: to.set_u64(key, static_cast<uint64_t>(*from.get_int(key))); break;
      case gguf::ValueType::array:
        if (auto s = from.get_string_array(key)) {
          to.set_string_array(key, *s);
        } else if (auto f = from.get_float_array(key)) {
          to.set_f32_array(key, *f);
        } else if (auto i = from.get_int_array(key)) {
          to.set_i32_array(key, std::vector<int32_t>(i->begin(), i->end()));
        }
        break;
      default: to.set_u32(key, static_cast<uint32_t>(*from.get_int(key))); break;
    }
  }
}

struct Pair {
  std::string mixed, reference;  // file paths
};

// The `tiny` random model (f32) requantized: matrix k gets kTypes[k % n]; the reference
// holds the dequantized values of those blocks as f32.
Pair write_models(const std::vector<DType>& types) {
  auto spec = dummy::make_dummy_spec("tiny", "f32", 17);
  EXPECT_TRUE(spec.ok());
  auto image = dummy::dummy_gguf(*spec)->build_in_memory(1);
  EXPECT_TRUE(image.ok()) << image.status().to_string();
  const gguf::GgufFile& src = *image->file;
  gguf::GgufBuilder mixed, reference;
  copy_metadata(src, mixed);
  copy_metadata(src, reference);
  size_t k = 0;
  for (const WeightTensor& t : src.tensors()) {
    const int64_t ne0 = t.ne[0], rows = t.n_dims == 1 ? 0 : t.rows();
    const auto* f = static_cast<const float*>(t.data);
    const DType type = rows == 0 ? DType::f32 : types[k++ % types.size()];
    const int64_t rb = row_bytes(type, ne0);
    EXPECT_TRUE(mixed.add_tensor(t.name, type, ne0, rows, [=](uint8_t* dst, int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) kernels::cpu::quantize_row_reference(type, f + r * ne0, dst + (r - b) * rb, ne0);
    }).ok());
    EXPECT_TRUE(reference.add_tensor(t.name, DType::f32, ne0, rows, [=](uint8_t* dst, int64_t b, int64_t e) {
      std::vector<uint8_t> q(static_cast<size_t>(rb));
      for (int64_t r = b; r < e; ++r) {
        kernels::cpu::quantize_row_reference(type, f + r * ne0, q.data(), ne0);
        kernels::cpu::dequantize_row(type, q.data(), reinterpret_cast<float*>(dst) + (r - b) * ne0, ne0);
      }
    }).ok());
  }
  const std::string base = "/tmp/troupe_mixed_types_" + std::to_string(::getpid());
  Pair p{base + "_mixed.gguf", base + "_reference.gguf"};
  EXPECT_TRUE(mixed.write_file(p.mixed).ok());
  EXPECT_TRUE(reference.write_file(p.reference).ok());
  return p;
}

// Logits after a prefill of `ids`, then after each of 6 greedy steps (teacher-forced on
// `forced` when given, else on the model's own argmax), and the ids taken.
using Steps = testing::GreedySteps;

Steps run(const std::string& path, const std::vector<int32_t>& prompt, const std::vector<int32_t>* forced) {
  Steps out;
  Platform* platform = testing::cpu_platform();
  EXPECT_NE(platform, nullptr);
  if (!platform) return out;
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.model.max_model_len = 64;
  auto gen = generation::OfflineGenerator::create(*platform, config, path);
  EXPECT_TRUE(gen.ok()) << gen.status().to_string();
  if (!gen.ok()) return out;
  return testing::greedy_steps(**gen, prompt, forced);
}

TEST(MixedTypes, PerTensorMixRunsAndMatchesItsDequantizedF32Twin) {
  const std::vector<DType> types = {DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl, DType::iq4_xs,
                                    DType::q4_k, DType::q6_k, DType::q8_0};
  const Pair p = write_models(types);
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 300, 17};
  const Steps ref = run(p.reference, prompt, nullptr);
  const Steps got = run(p.mixed, prompt, &ref.ids);  // teacher-forced on the reference's tokens
  std::remove(p.mixed.c_str());
  std::remove(p.reference.c_str());
  ASSERT_EQ(ref.logits.size(), 6u);
  ASSERT_EQ(got.logits.size(), 6u);
  for (size_t s = 0; s < ref.logits.size(); ++s) {
    ASSERT_EQ(got.logits[s].size(), ref.logits[s].size());
    double spread = 0, worst = 0;
    for (size_t v = 0; v < ref.logits[s].size(); ++v) {
      spread = std::max(spread, std::fabs(static_cast<double>(ref.logits[s][v])));
      worst = std::max(worst, std::fabs(static_cast<double>(got.logits[s][v]) - ref.logits[s][v]));
    }
    std::printf("step %zu: logit range %.3f, largest difference %.5f\n", s, spread, worst);
    EXPECT_GT(spread, 0.1) << "step " << s;  // a model that says something
    // 8-bit (K-quants) and 16-bit activations vs f32 ones: well under 2% of the logit range.
    EXPECT_LT(worst, 0.02 * spread) << "step " << s;
  }
}

}  // namespace
}  // namespace troupe
