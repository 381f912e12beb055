// The stories260K golden cases (tests/data/golden/stories260K_llamacpp.json:
// llama.cpp's greedy tokens with per-step top-1/top-2 logit margins) and the
// rule every golden test applies: equal, or diverging only after a step whose
// margin was below kFragileMargin (llama.cpp keeps an F16 KV cache).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::testing {

inline constexpr double kFragileMargin = 0.03;

inline nlohmann::json stories_golden() {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/stories260K_llamacpp.json");
  return nlohmann::json::parse(in);
}

/// Checks `got` against golden case `c` by the rule above; `fragile_margin` may be raised
/// for a reference whose own noise is shown to be larger (gemma_golden_test).
inline void expect_matches_case(const nlohmann::json& c, const std::vector<int32_t>& got,
                                double fragile_margin = kFragileMargin) {
  const auto want = c["output_ids"].get<std::vector<int32_t>>();
  const auto margins = c["top1_top2_logit_margin"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size()) << c["prompt"];
  size_t first_diff = want.size();
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      first_diff = i;
      break;
    }
  if (first_diff == want.size()) return;
  bool fragile = false;
  for (size_t i = 0; i <= first_diff; ++i) fragile |= margins[i] < fragile_margin;
  EXPECT_TRUE(fragile) << "prompt '" << c["prompt"].get<std::string>() << "' diverges from llama.cpp at step "
                       << first_diff << " (margin " << margins[first_diff] << ") with no fragile step before it";
}

}  // namespace troupe::testing
