// Greedy decoding by running the whole sequence again at every step (no KV state kept
// between steps), for tests that hold one model's logits to another's step by step.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/core/generation/offline_generator.hpp"

namespace troupe::testing {

/// The logits of the last token after one prefill of `ids` at positions 0.., the sequence in
/// blocks 0..3 (so at most 4 blocks of tokens); empty, with a test failure, if the step fails.
inline std::vector<float> prefill_logits(generation::OfflineGenerator& gen, const std::vector<int32_t>& ids) {
  ExecuteModelRequest req;
  auto& b = req.batch;
  const int n = static_cast<int>(ids.size());
  b.token_ids = ids;
  for (int i = 0; i < n; ++i) b.positions.push_back(i), b.slot_mapping.push_back(i);
  b.query_start = {0, n};
  b.seq_lens = {n};
  b.block_tables = {{0, 1, 2, 3}};
  b.logits_indices = {n - 1};
  auto r = gen.worker().execute_model(req);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r->logits : std::vector<float>{};
}

struct GreedySteps {
  std::vector<std::vector<float>> logits;  // after the prompt, then after each step
  std::vector<int32_t> ids;                // the argmax of each
};

/// Logits after `prompt` and after each of `steps` greedy steps (teacher-forced on
/// `forced` when given, else on the model's own argmax). The sequence lives in blocks
/// 0..3, so prompt and steps together stay within 4 blocks.
inline GreedySteps greedy_steps(generation::OfflineGenerator& gen, const std::vector<int32_t>& prompt,
                                const std::vector<int32_t>* forced, int steps = 6) {
  GreedySteps out;
  std::vector<int32_t> ids = prompt;
  for (int step = 0; step < steps; ++step) {
    std::vector<float> logits = prefill_logits(gen, ids);
    if (logits.empty()) return out;
    out.logits.push_back(logits);
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.ids.push_back(best);
    ids.push_back(forced ? (*forced)[static_cast<size_t>(step)] : best);
  }
  return out;
}

}  // namespace troupe::testing
