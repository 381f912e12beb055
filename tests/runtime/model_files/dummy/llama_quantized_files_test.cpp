// Files quantized by llama.cpp's llama-quantize (tests/data/quant/tiny-*.gguf, from
// tests/data/golden/gen_quant_types_llamacpp.py: the `tiny` f32 model of seed 21 as
// Q2_K, Q3_K_M, Q5_K_M, IQ4_NL and IQ4_XS, in llama.cpp's per-tensor mixes). Every
// tensor, read with troupe's dequantize_row, stays within its type's quantization
// error of the f32 original (rebuilt here from the seed); a misread bit layout would
// be off by about the values themselves. The files load and generate through the
// CPU plugin with logits near the f32 model's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "kernels/cpu/quantize.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/greedy_steps.hpp"

namespace troupe {
namespace {

const char* const kFiles[] = {"tiny-Q2_K", "tiny-Q3_K_M", "tiny-Q5_K_M", "tiny-IQ4_NL", "tiny-IQ4_XS"};

std::string path_of(const std::string& name) { return std::string(TROUPE_TEST_DATA_DIR) + "/quant/" + name + ".gguf"; }

// rms(dequantized - original) / rms(original) for uniform random weights; about twice
// what llama.cpp's quantizers reach on them.
double bound(DType t) {
  switch (t) {
    case DType::q2_k: return 0.40;
    case DType::q3_k: return 0.25;
    case DType::q4_k: case DType::iq4_nl: case DType::iq4_xs: return 0.12;
    case DType::q5_k: return 0.06;
    case DType::q6_k: return 0.03;
    case DType::q8_0: return 0.01;
    default: return 1e-6;  // f32 / f16 norms
  }
}

TEST(LlamaQuantizedFiles, EveryTensorIsWithinItsTypesErrorOfTheOriginal) {
  auto spec = dummy::make_dummy_spec("tiny", "f32", 21);
  ASSERT_TRUE(spec.ok());
  auto original = dummy::open_dummy_model(*spec);
  ASSERT_TRUE(original.ok()) << original.status().to_string();
  std::set<DType> seen;
  for (const char* name : kFiles) {
    SCOPED_TRACE(name);
    auto file = gguf::GgufFile::open(path_of(name));
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    std::map<std::string, int> types;
    for (const WeightTensor& t : (*file)->tensors()) {
      const WeightTensor* o = (*original)->tensor(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      const int64_t n = o->ne[0] * o->rows();
      ASSERT_EQ(t.ne[0] * t.rows(), n) << t.name;
      ASSERT_TRUE(kernels::cpu::supports_type(t.type)) << t.name << " " << to_string(t.type);
      std::vector<float> v(static_cast<size_t>(n));
      kernels::cpu::dequantize_row(t.type, t.data, v.data(), n);  // rows are contiguous: one long row
      const auto* f = static_cast<const float*>(o->data);
      double err = 0, ref = 0;
      for (int64_t i = 0; i < n; ++i) err += (v[i] - f[i]) * double(v[i] - f[i]), ref += double(f[i]) * f[i];
      const double rel = std::sqrt(err / ref);
      EXPECT_LT(rel, bound(t.type)) << t.name << " " << to_string(t.type);
      EXPECT_GT(rel, t.type == DType::f32 ? -1.0 : 1e-4) << t.name << " " << to_string(t.type);  // really quantized
      ++types[std::string(to_string(t.type))];
      seen.insert(t.type);
    }
    std::string mix;
    for (const auto& [type, count] : types) mix += " " + type + " x" + std::to_string(count);
    std::printf("%s:%s\n", name, mix.c_str());
  }
  for (DType t : {DType::q2_k, DType::q3_k, DType::q5_k, DType::iq4_nl, DType::iq4_xs})
    EXPECT_TRUE(seen.count(t)) << "no tensor of " << to_string(t) << " in the files";
}

// Each file loads and generates through the CPU plugin, and its logits stay near the
// f32 model's: the rms difference well below the logits' own spread.
TEST(LlamaQuantizedFiles, GenerateAndStayNearTheF32Model) {
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.model.max_model_len = 64;
  const std::vector<int32_t> prompt = {508, 340, 108, 365, 17, 300};
  EngineConfig dummy = config;
  dummy.model.load_format = "dummy";
  dummy.model.model_shape = "tiny";
  dummy.model.weight_type = "f32";
  dummy.model.seed = 21;
  auto f32 = generation::OfflineGenerator::create(*platform, dummy, "");
  ASSERT_TRUE(f32.ok()) << f32.status().to_string();
  const std::vector<float> want = testing::prefill_logits(**f32, prompt);
  ASSERT_FALSE(want.empty());
  double mean = 0;
  for (float v : want) mean += v;
  mean /= static_cast<double>(want.size());
  double spread = 0;  // rms of the f32 model's logits about their mean
  for (float v : want) spread += (v - mean) * (v - mean);
  spread = std::sqrt(spread / static_cast<double>(want.size()));
  for (const char* name : kFiles) {
    SCOPED_TRACE(name);
    auto gen = generation::OfflineGenerator::create(*platform, config, path_of(name));
    ASSERT_TRUE(gen.ok()) << gen.status().to_string();
    const std::vector<float> got = testing::prefill_logits(**gen, prompt);
    ASSERT_EQ(got.size(), want.size());
    double diff = 0;
    for (size_t v = 0; v < got.size(); ++v) diff += (got[v] - want[v]) * double(got[v] - want[v]);
    const double rel = std::sqrt(diff / static_cast<double>(got.size())) / spread;
    std::printf("%s: rms logit difference from the f32 model %.3f of the logits' spread\n", name, rel);
    // Quantization noise only; logits from misread weights would be unrelated (about 1.4).
    EXPECT_LT(rel, 0.5);
    sampling::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 8;
    p.ignore_eos = true;
    auto out = (*gen)->generate(prompt, p);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(out->token_ids.size(), 8u);
  }
}

}  // namespace
}  // namespace troupe
