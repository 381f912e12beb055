// The check behind every random-weights architecture golden (arch_golden_test,
// gpt2_plugin_test): the file `troupe make-gguf` writes for a case (same shape, layers,
// seed and type as tests/golden/gen_arch_goldens.sh used) is rebuilt, and troupe's
// log-probabilities at every generated step (teacher-forced on the reference's tokens,
// through a real platform plugin) are held to the reference's top 8.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/engine_config.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/hf/hf_folder_writer.hpp"
#include "troupe/platform.hpp"

namespace troupe::testing {

// Why these tolerances. Against the float64 reference: troupe reads the same dequantized
// weights but computes in float32 and quantizes activations to its 16-bit blocks for the
// dot products (kernels/cpu/matmul.hpp), so each matmul differs by ~1e-5 relative; over
// 1-6 layers and a 32k-262k-entry log-softmax the largest differences recorded were 0.0004
// to 0.0014 (the test prints them; 0.00138 for phi3.5's 4300 tokens). kNumpyTol = 2e-3 sits
// far below what a wrong model
// gives, measured with ref_forward.py's REF_DROP on these very files: without qwen2's
// biases the top-8 log-probabilities move by up to 0.45, without qwen3's q/k norms by
// 1.08, with phi3's gate and up halves swapped by 3.5, without Llama 3's rope_freqs by
// 1.04 past position 8192 (but only 0.009 at positions below 40, which is why that case
// has an 8200-token prompt), without Mistral's window the top 8 after 8200 tokens share no
// token with the windowed model's, and with Phi-3.5's short factor set in place of the long
// one (REF_DROP=longrope) they share 1 of 8, after 24 tokens and after 4300.
// Against llama.cpp: its CPU matmuls quantize activations to 8-bit q8_0 blocks, so it sits
// further from the float64 values than troupe does: on the cases both references have, the
// largest llama.cpp-vs-numpy difference was 0.021 (qwen2), 0.020 (qwen3), 0.038 (phi3),
// 0.040 (llama-3.2), 0.049 (phi3.5), 0.020 (gemma3) and 0.049 (gemma2, whose embeddings are
// scaled by sqrt(2304) = 48 before llama.cpp rounds them to 8 bits), while troupe-vs-numpy
// stays below 0.0014. So troupe-vs-llama.cpp reaches ~0.05 from llama.cpp's rounding alone (gemma2:
// 0.0496 measured): kLlamaCppTol = 0.08 leaves room for that and is still 5x below the
// smallest wrong-model error above. Greedy tokens must agree unless the
// reference's top-1/top-2 gap was below twice the tolerance.
inline constexpr double kNumpyTol = 2e-3;
inline constexpr double kLlamaCppTol = 0.08;

// The golden file's cases, or null when it is absent.
inline nlohmann::json goldens(const std::string& file) {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/golden/" + file);
  if (!in) return nullptr;
  return nlohmann::json::parse(in);
}

// Log-softmax of one row of logits, in double.
inline std::vector<double> log_softmax(const float* row, int64_t n) {
  const double mx = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = row[i] - lse;
  return out;
}

// The logits of rows [first_row, ids.size()) of one sequence `ids`, prefilled in chunks.
inline std::vector<std::vector<double>> logprobs_of_rows(generation::OfflineGenerator& gen,
                                                         const std::vector<int32_t>& ids,
                                                         size_t first_row, int block_size, int chunk) {
  std::vector<std::vector<double>> rows;
  const int n = static_cast<int>(ids.size());
  std::vector<int32_t> table;
  for (int b = 0; b * block_size < n; ++b) table.push_back(b);
  const int64_t vocab = gen.model_info().vocab_size;
  for (int start = 0; start < n; start += chunk) {
    const int end = std::min(n, start + chunk);
    ExecuteModelRequest req;
    auto& b = req.batch;
    b.token_ids.assign(ids.begin() + start, ids.begin() + end);
    for (int i = start; i < end; ++i) {
      b.positions.push_back(i);
      b.slot_mapping.push_back(i);
      if (i >= static_cast<int>(first_row)) b.logits_indices.push_back(i - start);
    }
    b.query_start = {0, end - start};
    b.seq_lens = {end};
    b.block_tables = {table};
    auto out = gen.worker().execute_model(req);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return {};
    for (size_t r = 0; r < b.logits_indices.size(); ++r)
      rows.push_back(log_softmax(out->logits.data() + static_cast<int64_t>(r) * vocab, vocab));
  }
  return rows;
}

inline void check_case(Platform* platform, const nlohmann::json& c, double tol, bool hf_folder = false) {
  const double fragile_gap = 2 * tol;
  ASSERT_TRUE(c.is_object()) << "no such case in the golden file";
  const std::string shape = c["shape"];
  SCOPED_TRACE(shape);
  auto spec = dummy::make_dummy_spec(shape, c["weight_type"].get<std::string>(), c["seed"].get<uint64_t>(),
                                     c["layers"].get<int>());
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto builder = dummy::dummy_gguf(*spec);
  ASSERT_TRUE(builder.ok()) << builder.status().to_string();
  std::string path = "/tmp/troupe_arch_golden_" + std::to_string(::getpid()) + "_" + shape + ".gguf";
  ASSERT_TRUE(builder->write_file(path).ok());
  if (hf_folder) {  // the same weights as a Hugging Face folder (hf_folder_writer)
    auto image = builder->build_in_memory(2);
    ASSERT_TRUE(image.ok()) << image.status().to_string();
    std::remove(path.c_str());
    path = "/tmp/troupe_arch_golden_" + std::to_string(::getpid()) + "_" + shape + "_hf";
    const Status s = hf::write_hf_folder(spec->shape, *image->file, path);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  size_t longest = 0;
  for (const auto& r : c["runs"]) longest = std::max(longest, r["prompt_ids"].size() + r["output_ids"].size());
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.model.max_model_len = static_cast<int64_t>(longest + 64);
  config.scheduler.max_num_batched_tokens = 512;
  ASSERT_NE(platform, nullptr);
  auto gen = generation::OfflineGenerator::create(*platform, config, path);
  std::filesystem::remove_all(path);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  EXPECT_EQ((*gen)->model_info().architecture, (*spec).shape.arch);
  double worst = 0;
  for (const auto& run : c["runs"]) {
    auto ids = run["prompt_ids"].get<std::vector<int32_t>>();
    const auto out_ids = run["output_ids"].get<std::vector<int32_t>>();
    const size_t first = ids.size() - 1;  // the row that predicts the first output token
    ids.insert(ids.end(), out_ids.begin(), out_ids.end() - 1);
    SCOPED_TRACE("prompt of " + std::to_string(run["prompt_ids"].size()) + " tokens");
    const auto rows = logprobs_of_rows(**gen, ids, first, config.cache.block_size, 512);
    ASSERT_EQ(rows.size(), out_ids.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& step = run["steps"][i];
      if (step.is_null()) continue;  // llama-server reported no probabilities for this token (cut UTF-8)
      const auto& top = step["top"];
      const auto& lp = rows[i];
      const auto best = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
      const double gap = top.size() > 1 ? top[0][1].get<double>() - top[1][1].get<double>() : 1e9;
      if (gap >= fragile_gap) {
        EXPECT_EQ(best, out_ids[i]) << "step " << i << " (the reference's top-1/top-2 gap " << gap << ")";
      }
      for (const auto& t : top) {
        const double got = lp[t[0].get<size_t>()], want = t[1].get<double>();
        worst = std::max(worst, std::fabs(got - want));
        EXPECT_NEAR(got, want, tol) << "step " << i << " token " << t[0];
      }
    }
  }
  std::printf("%s: largest log-probability difference from the reference %.5f\n", shape.c_str(), worst);
  // A window on every layer (Mistral): the engine path too, whose KV cache manager releases
  // the blocks that leave the window, gives the reference's greedy tokens (up to a near tie).
  if ((*gen)->model_info().sliding_window > 0) {
    for (const auto& run : c["runs"]) {
      const auto want = run["output_ids"].get<std::vector<int32_t>>();
      sampling::SamplingParams params;
      params.temperature = 0;
      params.max_tokens = static_cast<int32_t>(want.size());
      params.ignore_eos = true;
      auto out = (*gen)->generate(run["prompt_ids"].get<std::vector<int32_t>>(), params);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      ASSERT_EQ(out->token_ids.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const auto& step = run["steps"][i];
        if (step.is_null()) break;
        const auto& top = step["top"];
        if (top.size() > 1 && top[0][1].get<double>() - top[1][1].get<double>() < fragile_gap) break;
        EXPECT_EQ(out->token_ids[i], want[i]) << "engine path, prompt of " << run["prompt_ids"].size() << ", step " << i;
        if (out->token_ids[i] != want[i]) break;
      }
    }
  }
}

// The case of `shape` (of `weight_type`, when given: a shape may have cases in several types).
inline nlohmann::json case_of(const nlohmann::json& g, const std::string& shape, const std::string& weight_type = "") {
  for (const auto& c : g["cases"])
    if (c["shape"] == shape && (weight_type.empty() || c["weight_type"] == weight_type)) return c;
  return nullptr;
}

inline void check_against(Platform* platform, const std::string& shape, const std::string& file, double tol,
                          const std::string& weight_type = "", bool hf_folder = false) {
  const auto g = goldens(file);
  if (g.is_null()) {
    GTEST_SKIP() << "tests/data/golden/" << file << " is absent (tests/golden/gen_arch_goldens.sh)";
  }
  std::printf("reference: %s\n", g["reference"].get<std::string>().c_str());
  check_case(platform, case_of(g, shape, weight_type), tol, hf_folder);
}

}  // namespace troupe::testing
