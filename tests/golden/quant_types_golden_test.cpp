// Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS against llama.cpp
// (tests/data/golden/quant_types_llamacpp.json, from gen_quant_types_llamacpp.py):
// troupe's `tiny` model quantized by llama.cpp's llama-quantize (llama.cpp's own
// blocks, in its per-tensor mixes: tests/data/quant/), and the same shape written
// by `troupe make-gguf` in each new type (troupe's blocks). Through the real CPU
// platform plugin, per prompt:
// - the first step's log-probabilities of llama.cpp's 8 best tokens, relative to
//   its best, agree within kLogprobTolerance: a misread bit moves them by far more;
// - greedy tokens equal llama.cpp's, or diverge only after a step whose recorded
//   top-1/top-2 margin was below kFragileMargin (golden_cases.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "tests/golden/golden_cases.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/greedy_steps.hpp"

namespace troupe {
namespace {

// Both engines quantize activations (8-bit for the K-quants in both; llama.cpp 8-bit,
// troupe 16-bit for IQ4_NL) and keep an F16 KV cache (llama.cpp) or f16 (troupe):
// logits of this model (|logit| < 3) differ by a few 1e-3.
constexpr double kLogprobTolerance = 0.02;

const std::string kGoldenPath = std::string(TROUPE_TEST_DATA_DIR) + "/golden/quant_types_llamacpp.json";

nlohmann::json golden() {
  std::ifstream in(kGoldenPath);
  return nlohmann::json::parse(in);
}

EngineConfig config_for(const nlohmann::json& model) {
  EngineConfig c;
  c.parallel.num_threads = 2;
  c.model.max_model_len = 64;
  if (model.contains("dummy")) {
    c.model.load_format = "dummy";
    c.model.model_shape = model["dummy"]["shape"].get<std::string>();
    c.model.weight_type = model["dummy"]["weight_type"].get<std::string>();
    c.model.seed = model["dummy"]["seed"].get<uint64_t>();
  }
  return c;
}

std::string path_for(const nlohmann::json& model) {
  return model.contains("file") ? std::string(TROUPE_TEST_DATA_DIR) + "/" + model["file"].get<std::string>() : "";
}

TEST(QuantTypesGolden, EveryModelAgreesWithLlamaCpp) {
  // The data needs llama.cpp's llama-quantize and llama-server once (see the generator).
  if (!std::ifstream(kGoldenPath).good())
    GTEST_SKIP() << kGoldenPath << " is not generated yet: run tests/data/golden/gen_quant_types_llamacpp.py";
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  const auto g = golden();
  ASSERT_EQ(g["models"].size(), 10u);
  for (const auto& model : g["models"]) {
    SCOPED_TRACE(model["name"].get<std::string>());
    auto gen = generation::OfflineGenerator::create(*platform, config_for(model), path_for(model));
    ASSERT_TRUE(gen.ok()) << gen.status().to_string();
    int exact = 0;
    for (const auto& c : model["cases"]) {
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const std::vector<float> logits = testing::prefill_logits(**gen, prompt);
      ASSERT_FALSE(logits.empty());
      // log-softmax differences are logit differences: llama.cpp's top tokens relative to its best.
      const auto top = c["first_step_top_logprobs"];
      const int32_t best = top[0][0].get<int32_t>();
      for (const auto& t : top) {
        const int32_t id = t[0].get<int32_t>();
        const double theirs = t[1].get<double>() - top[0][1].get<double>();
        const double ours = static_cast<double>(logits[static_cast<size_t>(id)]) - logits[static_cast<size_t>(best)];
        EXPECT_NEAR(ours, theirs, kLogprobTolerance) << "token " << id << " vs " << best;
      }
      sampling::SamplingParams p;
      p.temperature = 0;
      p.max_tokens = g["n_predict"].get<int>();
      p.ignore_eos = true;
      auto out = (*gen)->generate(prompt, p);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      testing::expect_matches_case(c, out->token_ids);
      exact += out->token_ids == c["output_ids"].get<std::vector<int32_t>>();
    }
    std::printf("%s: %d of %zu cases token-exact with llama.cpp\n", model["name"].get<std::string>().c_str(), exact,
                model["cases"].size());
  }
}

}  // namespace
}  // namespace troupe
