// An output never depends on the batch it ran in: each sequence run alone
// (whole prompt, then greedy decode steps) gives bit-identical logits and the
// same greedy tokens as when it runs inside batches of other sequences, with
// several token budgets (chunked prefill, prefill chunks beside decodes) and
// several numbers of sequences at once. On stories260K (f32 weights) and, when
// TROUPE_TEST_MODEL is set, SmolLM2 (Q4_1 weights, grouped-query attention),
// with an f16 and an f32 KV cache, through the real CPU worker.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/loaded_worker.hpp"
#include "troupe/worker.hpp"

namespace troupe {
namespace {

constexpr int kBs = 16;            // tokens per block
constexpr int kBlocksPerSeq = 8;   // every sequence slot owns 8 blocks: up to 128 tokens
constexpr int kSlots = 16;
constexpr int kDecodeSteps = 4;

struct Seq {
  std::vector<int32_t> prompt;
  // What the sequence produced: logits after its prompt and after each decode step, and the
  // greedy token chosen from each.
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;
};

class BatchInvariance : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    const auto& [model, kv_dtype] = GetParam();
    std::string path = model == "stories260K" ? testing::stories_path() : "";
    if (model == "smollm2") {
      const char* env = std::getenv("TROUPE_TEST_MODEL");
      if (!env || !*env) GTEST_SKIP() << "TROUPE_TEST_MODEL is not set (scripts/test.sh sets it)";
      path = env;
    }
    Platform* platform = testing::cpu_platform();
    ASSERT_NE(platform, nullptr);
    runtime::register_builtin_models();
    EngineConfig config;
    config.parallel.num_threads = 2;
    config.scheduler.max_num_batched_tokens = 512;
    config.cache.cache_dtype = kv_dtype;
    auto w = testing::load_worker(*platform, config, path, kSlots * kBlocksPerSeq);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    w_ = std::move(*w);
    auto spec = w_.worker->get_kv_cache_spec();
    ASSERT_TRUE(spec.ok());
    ASSERT_EQ(spec->dtype, kv_dtype == "fp16" ? DType::f16 : DType::f32);
  }

  static int32_t argmax(const std::vector<float>& l) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  }

  std::vector<Seq> prompts() const {
    const int lens[] = {5, 23, 40, 17, 64, 1, 33};
    std::vector<Seq> seqs;
    for (int s = 0; s < static_cast<int>(std::size(lens)); ++s) {
      Seq q;
      q.prompt.push_back(1);
      for (int i = 1; i < lens[s]; ++i)
        q.prompt.push_back(static_cast<int32_t>(3 + (i * 37 + s * 101) % (std::min<int64_t>(w_.vocab, 2000) - 3)));
      seqs.push_back(std::move(q));
    }
    return seqs;
  }

  // Every sequence in slot `slot0 + index`, scheduled like continuous batching: at most
  // `max_seqs` sequences at once, `budget` tokens per step, running ones first (a decode
  // takes 1 token; a prompt takes what the budget leaves: chunked prefill).
  std::vector<Seq> run_batched(int slot0, int budget, int max_seqs) {
    std::vector<Seq> seqs = prompts();
    const int n = static_cast<int>(seqs.size());
    std::vector<int> done_tokens(n, 0);  // prompt tokens already in the cache
    std::vector<int> decoded(n, 0);
    std::vector<int> running;
    int next = 0;
    while (true) {
      running.erase(std::remove_if(running.begin(), running.end(), [&](int s) { return decoded[s] == kDecodeSteps; }),
                    running.end());
      while (static_cast<int>(running.size()) < max_seqs && next < n) running.push_back(next++);
      if (running.empty()) break;
      std::vector<testing::BatchPart> parts;
      std::vector<int> wants;  // the sequence of each logits row
      int left = budget;
      for (int s : running) {
        if (left == 0) break;
        Seq& q = seqs[s];
        const int plen = static_cast<int>(q.prompt.size());
        if (done_tokens[s] < plen) {
          const int take = std::min(left, plen - done_tokens[s]);
          const bool last = done_tokens[s] + take == plen;
          parts.push_back({(slot0 + s) * kBlocksPerSeq, q.prompt.data() + done_tokens[s], take, done_tokens[s], last});
          if (last) wants.push_back(s);
          done_tokens[s] += take;
          left -= take;
        } else {
          // The latest greedy token goes in after the prompt and the tokens decoded so far.
          parts.push_back({(slot0 + s) * kBlocksPerSeq, &q.tokens.back(), 1, plen + decoded[s], true});
          wants.push_back(s);
          ++decoded[s];
          left -= 1;
        }
      }
      auto rows = testing::run_step(w_, parts, kBs);
      if (rows.size() != wants.size()) return {};
      for (size_t r = 0; r < rows.size(); ++r) {
        Seq& q = seqs[wants[r]];
        q.tokens.push_back(argmax(rows[r]));
        q.logits.push_back(std::move(rows[r]));
      }
    }
    return seqs;
  }

  testing::LoadedWorker w_;
};

TEST_P(BatchInvariance, EverySequenceAloneEqualsItInAnyBatchBitForBit) {
  // Alone: one sequence per step, the whole prompt at once.
  const std::vector<Seq> alone = run_batched(0, 512, 1);
  ASSERT_FALSE(alone.empty());
  for (const Seq& q : alone) ASSERT_EQ(q.logits.size(), static_cast<size_t>(kDecodeSteps + 1));
  struct Schedule {
    int budget, max_seqs;
  };
  // Whole prompts together; chunks of 48, 16 and 7 tokens beside other sequences' decodes;
  // two at a time.
  const Schedule schedules[] = {{512, 7}, {48, 7}, {16, 7}, {7, 3}, {40, 2}};
  int slot0 = 8;
  for (const auto& sch : schedules) {
    SCOPED_TRACE("budget " + std::to_string(sch.budget) + ", up to " + std::to_string(sch.max_seqs) + " sequences");
    const std::vector<Seq> batched = run_batched(slot0, sch.budget, sch.max_seqs);
    slot0 = slot0 == 8 ? 0 : 8;  // a fresh block range each time (the cache holds 16 slots)
    ASSERT_EQ(batched.size(), alone.size());
    for (size_t s = 0; s < alone.size(); ++s) {
      SCOPED_TRACE("sequence " + std::to_string(s) + " (prompt of " + std::to_string(alone[s].prompt.size()) +
                   " tokens)");
      ASSERT_EQ(batched[s].tokens, alone[s].tokens);
      ASSERT_EQ(batched[s].logits.size(), alone[s].logits.size());
      for (size_t k = 0; k < alone[s].logits.size(); ++k)
        ASSERT_TRUE(batched[s].logits[k] == alone[s].logits[k]) << "logits " << k << " differ";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ModelsAndKvDtypes, BatchInvariance,
                         ::testing::Combine(::testing::Values("stories260K", "smollm2"),
                                            ::testing::Values("fp16", "fp32")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace troupe
