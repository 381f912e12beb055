// The router check of the mixture-of-experts goldens (moe_golden_test, moe_golden_sim_test):
// troupe's top-k choice for every prompt token of every layer, the most probable expert
// first, against a reference's (ref_moe.py's "routes", or llama.cpp's ffn_moe_topk tensors
// recorded by gen_moe_routes.sh). The log-probabilities are arch_golden_check.hpp's.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/rank/models/moe_ffn.hpp"
#include "tests/golden/arch_golden_check.hpp"
#include "troupe/platform.hpp"

namespace troupe::testing {

// Every layer's choices of one prefill of `ids`: [layer][token][k].
using Routes = std::vector<std::vector<std::vector<int32_t>>>;

inline Routes routes_of(generation::OfflineGenerator& gen, const std::vector<int32_t>& ids, int block_size) {
  std::map<int, std::vector<std::vector<int32_t>>> by_layer;
  models::set_moe_route_observer([&by_layer](int layer, int64_t n_tokens, const models::MoeRoutes& r) {
    auto& rows = by_layer[layer];
    for (int64_t t = 0; t < n_tokens; ++t)
      rows.emplace_back(r.experts.begin() + t * r.n_used, r.experts.begin() + (t + 1) * r.n_used);
  });
  (void)logprobs_of_rows(gen, ids, ids.size() - 1, block_size, 512);
  models::set_moe_route_observer({});
  Routes out;
  for (auto& [layer, rows] : by_layer) out.push_back(std::move(rows));
  return out;
}

// A token's choice may differ from the reference's only where the reference's k-th and
// (k+1)-th router logits were nearer than this: the router's logits carry the error of
// everything before them (float32 against float64: ~1e-5; 8-bit activations, llama.cpp's
// for every q8_0 and MXFP4 matrix and troupe's for MXFP4: ~1e-3), so a near tie may fall
// either way. Measured on these files: against numpy no choice went the other way; against
// llama.cpp none on the f32 files, and on the MXFP4 one (q8_0 attention, MXFP4 experts)
// 5 of 248, at margins 2.8e-6 to 2.3e-3 (tiny-gpt-oss's router logits span only ~0.3). The
// order within the k is not compared: the sum of the experts' shares does not depend on it
// (troupe adds them in expert order), only the set does. A wrong k or gating changes most
// choices, far more than the budget below allows.
inline constexpr double kRouteTieMargin = 5e-3;

// Builds the case's file, prefills each run's prompt on `platform` and compares the sets of
// experts with run["routes"]: equal, except for near ties (kRouteTieMargin, run["route_margins"]),
// of which there may be at most one in 40 choices.
inline void check_routes(Platform* platform, const nlohmann::json& c) {
  ASSERT_TRUE(c.is_object()) << "no such case in the golden file";
  const std::string shape = c["shape"];
  SCOPED_TRACE(shape + " " + c["weight_type"].get<std::string>());
  auto spec = dummy::make_dummy_spec(shape, c["weight_type"].get<std::string>(), c["seed"].get<uint64_t>(),
                                     c["layers"].get<int>());
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto builder = dummy::dummy_gguf(*spec);
  ASSERT_TRUE(builder.ok()) << builder.status().to_string();
  const std::string path = "/tmp/troupe_moe_routes_" + std::to_string(::getpid()) + "_" + shape + ".gguf";
  ASSERT_TRUE(builder->write_file(path).ok());
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.model.max_model_len = 1024;
  config.scheduler.max_num_batched_tokens = 512;
  ASSERT_NE(platform, nullptr);
  auto gen = generation::OfflineGenerator::create(*platform, config, path);
  std::remove(path.c_str());
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  int compared = 0, near_ties = 0;
  for (const auto& run : c["runs"]) {
    if (!run.contains("routes")) continue;
    const auto ids = run["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = run["routes"].get<Routes>();
    const auto margins = run["route_margins"].get<std::vector<std::vector<double>>>();
    const Routes got = routes_of(**gen, ids, config.cache.block_size);
    ASSERT_EQ(got.size(), want.size()) << "layers";
    for (size_t l = 0; l < want.size(); ++l) {
      ASSERT_GE(got[l].size(), want[l].size()) << "layer " << l;
      for (size_t t = 0; t < want[l].size(); ++t, ++compared) {
        auto a = got[l][t], b = want[l][t];
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a == b) continue;
        const double margin = margins[l][t];
        if (margin < kRouteTieMargin) {
          ++near_ties;
          continue;
        }
        ADD_FAILURE() << "layer " << l << ", prompt token " << t << ": experts " << ::testing::PrintToString(got[l][t])
                      << ", the reference's " << ::testing::PrintToString(want[l][t]) << " (margin " << margin << ")";
      }
    }
  }
  EXPECT_GT(compared, 0) << "the case has no routes";
  EXPECT_LE(near_ties * 40, compared) << near_ties << " near ties went the other way in " << compared << " choices";
  std::printf("%s: %d token choices compared with the reference's, %d near ties the other way\n", shape.c_str(),
              compared, near_ties);
}

}  // namespace troupe::testing
