// Greedy generation of the real Gemma 3 270M (Q4_K_M) through the CPU platform plugin
// against llama.cpp b11434 (tests/data/golden/gemma3_270m_llamacpp.json, made by
// tests/data/golden/gen_gemma3_llamacpp.py): from llama.cpp's prompt token ids, token for
// token, a flip accepted only after a step whose top-1/top-2 margin was below
// kFragileMargin. Two prompts are longer than the 512-token sliding window. Skipped
// unless TROUPE_GEMMA_MODEL (scripts/test.sh sets it from scripts/fetch-model.sh
// gemma-3-270m) or TROUPE_GEMMA3_MODEL names the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/generation/offline_generator.hpp"
#include "tests/golden/golden_cases.hpp"
#include "tests/platforms/cpu_test_platform.hpp"

namespace troupe {
namespace {

std::string gemma3_path() {
  for (const char* name : {"TROUPE_GEMMA_MODEL", "TROUPE_GEMMA3_MODEL"})
    if (const char* p = std::getenv(name); p != nullptr && std::filesystem::exists(p)) return p;
  return {};
}

nlohmann::json gemma3_golden() {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/gemma3_270m_llamacpp.json");
  return nlohmann::json::parse(in);
}

// All cases through one generator; max_num_batched_tokens small enough that the long
// prompts are prefilled in chunks that cross the window (or large enough for one pass).
void run_cases(int64_t max_num_batched_tokens) {
  const std::string path = gemma3_path();
  if (path.empty()) GTEST_SKIP() << "TROUPE_GEMMA_MODEL is not set (scripts/fetch-model.sh gemma-3-270m)";
  Platform* platform = testing::cpu_platform();
  ASSERT_NE(platform, nullptr);
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  auto gen = generation::OfflineGenerator::create(*platform, config, path);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  const auto g = gemma3_golden();
  int exact = 0, tokenizer_agrees = 0;
  for (const auto& c : g["cases"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>().substr(0, 60));
    const auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    tokenizer_agrees += (*gen)->tokenizer().encode(c["prompt"].get<std::string>(), true, true) == prompt_ids;
    sampling::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = c["n_predict"].get<int>();
    p.ignore_eos = true;  // the reference never stops early
    auto out = (*gen)->generate(prompt_ids, p);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_matches_case(c, out->token_ids);
    const auto want = c["output_ids"].get<std::vector<int32_t>>();
    exact += out->token_ids == want;
    for (size_t i = 0; i < want.size() && i < out->token_ids.size(); ++i)
      if (out->token_ids[i] != want[i]) {
        std::printf("  %zu-token prompt: first difference at step %zu (llama.cpp's margin there %.4f)\n",
                    prompt_ids.size(), i, c["top1_top2_logit_margin"][i].get<double>());
        break;
      }
  }
  // The tokenizer is not what this test holds (Gemma's SentencePiece fixes are their own work).
  std::printf("gemma3 270M (max_num_batched_tokens %lld): %d of %zu cases token-exact with llama.cpp; troupe's "
              "tokenizer gives llama.cpp's prompt ids for %d\n",
              static_cast<long long>(max_num_batched_tokens), exact, g["cases"].size(), tokenizer_agrees);
}

TEST(GoldenGemma3, GreedyMatchesLlamaCpp) { run_cases(2048); }

TEST(GoldenGemma3, GreedyMatchesLlamaCppInChunkedPrefill) { run_cases(96); }

}  // namespace
}  // namespace troupe
