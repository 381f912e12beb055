// LoRA on the worker (LoraExtension of the SDK's ModelRunnerWorker), on the real
// CPU platform with stories260K: `troupe make-lora`'s writer makes random
// adapters and the models with them merged in; the adapter's logits equal the
// merged model's, a step that mixes the base model and two adapters gives each
// sequence what it gets alone, and bad adapters are refused with the reason.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <string>

#include "runtime/config/engine_config.hpp"
#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/rank/lora/lora_file.hpp"
#include "runtime/rank/lora/lora_writer.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "tests/platforms/cpu_test_platform.hpp"
#include "tests/platforms/loaded_worker.hpp"
#include "troupe/extensions.hpp"

namespace troupe {
namespace {

constexpr int kBlockSize = 16;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("troupe-lora-test-" + std::to_string(getpid()) + "-" + name))
      .string();
}

struct Seq {
  int first_block;
  std::vector<int32_t> ids;
  int start_pos;
  int64_t lora;
};

// One step of `seqs`; the last-token logits row of each.
std::vector<std::vector<float>> step(testing::LoadedWorker& w, const std::vector<Seq>& seqs) {
  ExecuteModelRequest req;
  auto& b = req.batch;
  b.query_start.push_back(0);
  bool any_lora = false;
  for (const Seq& s : seqs) {
    for (size_t i = 0; i < s.ids.size(); ++i) {
      const int pos = s.start_pos + static_cast<int>(i);
      b.token_ids.push_back(s.ids[i]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{s.first_block + pos / kBlockSize} * kBlockSize + pos % kBlockSize);
    }
    b.query_start.push_back(b.num_tokens());
    const int len = s.start_pos + static_cast<int>(s.ids.size());
    b.seq_lens.push_back(len);
    std::vector<int32_t> table;
    for (int i = 0; i < (len + kBlockSize - 1) / kBlockSize; ++i) table.push_back(s.first_block + i);
    b.block_tables.push_back(table);
    b.logits_indices.push_back(b.num_tokens() - 1);
    b.lora_ids.push_back(s.lora);
    any_lora |= s.lora != 0;
  }
  if (!any_lora) b.lora_ids.clear();
  auto out = w.worker->execute_model(req);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  std::vector<std::vector<float>> rows;
  if (!out.ok()) return rows;
  for (size_t r = 0; r < seqs.size(); ++r)
    rows.emplace_back(out->logits.begin() + static_cast<int64_t>(r) * w.vocab,
                      out->logits.begin() + static_cast<int64_t>(r + 1) * w.vocab);
  return rows;
}

int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Prompt, then greedy decoding: every logits row (prompt's last, then each decode step).
std::vector<std::vector<float>> generate(testing::LoadedWorker& w, int64_t lora, int first_block, int steps = 6) {
  std::vector<int32_t> ids = {1, 45, 67, 89, 12, 300};
  std::vector<std::vector<float>> rows = step(w, {{first_block, ids, 0, lora}});
  for (int s = 0; s < steps && !rows.empty(); ++s) {
    const int pos = static_cast<int>(ids.size());
    ids.push_back(argmax(rows.back()));
    auto next = step(w, {{first_block, {ids.back()}, pos, lora}});
    if (next.empty()) break;
    rows.push_back(next[0]);
  }
  return rows;
}

class LoraTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runtime::register_builtin_models();
    const std::string base = testing::stories_path();
    for (int k = 1; k <= 2; ++k) {
      lora::RandomLoraOptions o;
      o.rank = 4 * k;
      o.alpha = 8.0f * static_cast<float>(k);
      o.seed = static_cast<uint64_t>(k);
      if (k == 2) o.kinds = {"attn_q", "attn_v", "ffn_down"};  // a partial adapter
      ASSERT_TRUE(lora::write_random_lora(base, o, adapter(k)).ok());
      ASSERT_TRUE(lora::write_merged_model(base, adapter(k), merged(k)).ok());
    }
  }
  static void TearDownTestSuite() {
    for (int k = 1; k <= 2; ++k) {
      std::remove(adapter(k).c_str());
      std::remove(merged(k).c_str());
    }
  }
  static std::string adapter(int k) { return temp_path("adapter" + std::to_string(k) + ".gguf"); }
  static std::string merged(int k) { return temp_path("merged" + std::to_string(k) + ".gguf"); }

  static testing::LoadedWorker load(const std::string& path, bool lora, int max_rank = 16) {
    EngineConfig config;
    config.parallel.num_threads = 2;
    config.scheduler.max_num_batched_tokens = 64;
    config.lora.enable_lora = lora;
    config.lora.max_lora_rank = max_rank;
    auto w = testing::load_worker(*testing::cpu_platform(), config, path, 16);
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    return w.ok() ? std::move(*w) : testing::LoadedWorker{};
  }
  static Status add(testing::LoadedWorker& w, int64_t id, const std::string& path) {
    auto* ext = find_extension<LoraExtension>(*w.worker);
    if (ext == nullptr) return internal_error("no LoRA extension");
    auto file = lora::read_lora_file(path);
    if (!file.ok()) return file.status();
    return ext->add_lora(id, (*file)->spec);
  }
};

TEST_F(LoraTest, TheExtensionIsOfferedOnlyWithEnableLora) {
  auto off = load(testing::stories_path(), false);
  ASSERT_NE(off.worker, nullptr);
  EXPECT_EQ(find_extension<LoraExtension>(*off.worker), nullptr);
  auto on = load(testing::stories_path(), true);
  ASSERT_NE(on.worker, nullptr);
  EXPECT_NE(find_extension<LoraExtension>(*on.worker), nullptr);
}

TEST_F(LoraTest, AnAdapterGivesTheMergedModelsLogitsAndTokens) {
  auto w = load(testing::stories_path(), true);
  ASSERT_NE(w.worker, nullptr);
  ASSERT_TRUE(add(w, 1, adapter(1)).ok());
  auto* ext = find_extension<LoraExtension>(*w.worker);
  ASSERT_EQ(*ext->list_loras(), std::vector<int64_t>{1});
  const auto base = generate(w, 0, 0);
  const auto with = generate(w, 1, 4);
  auto m = load(merged(1), false);
  ASSERT_NE(m.worker, nullptr);
  const auto want = generate(m, 0, 0);
  ASSERT_EQ(with.size(), want.size());
  float base_diff = 0;
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_LT(max_abs_diff(with[i], want[i]), 2e-3f) << "row " << i;
    EXPECT_EQ(argmax(with[i]), argmax(want[i])) << "row " << i;
    base_diff = std::max(base_diff, max_abs_diff(with[i], base[i]));
  }
  EXPECT_GT(base_diff, 0.05f) << "the adapter should change the logits";
  // Removed: the base model again; naming it in a step is an error.
  ASSERT_TRUE(ext->pin_lora(1).ok());
  ASSERT_TRUE(ext->remove_lora(1).ok());
  EXPECT_TRUE(ext->list_loras()->empty());
  EXPECT_EQ(ext->remove_lora(1).code(), StatusCode::not_found);
  ExecuteModelRequest req;
  req.batch = {{1}, {0}, {0, 1}, {1}, {{0}}, {0}, {0}, {1}};
  auto refused = w.worker->execute_model(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not loaded"), std::string::npos) << refused.status().message();
}

TEST_F(LoraTest, AMixedStepGivesEachSequenceWhatItGetsAlone) {
  auto w = load(testing::stories_path(), true);
  ASSERT_NE(w.worker, nullptr);
  ASSERT_TRUE(add(w, 1, adapter(1)).ok());
  ASSERT_TRUE(add(w, 2, adapter(2)).ok());
  const std::vector<int32_t> p0 = {1, 45, 67, 89}, p1 = {1, 300, 12, 7, 9}, p2 = {1, 22, 33};
  const auto alone0 = step(w, {{0, p0, 0, 0}});
  const auto alone1 = step(w, {{2, p1, 0, 1}});
  const auto alone2 = step(w, {{4, p2, 0, 2}});
  auto m2 = load(merged(2), false);
  const auto merged2 = step(m2, {{0, p2, 0, 0}});
  // One step: adapter 2, base, adapter 1, adapter 2 again (another sequence).
  const auto mixed = step(w, {{6, p2, 0, 2}, {8, p0, 0, 0}, {10, p1, 0, 1}, {12, p2, 0, 2}});
  ASSERT_EQ(mixed.size(), 4u);
  EXPECT_LT(max_abs_diff(mixed[0], alone2[0]), 1e-4f);
  EXPECT_LT(max_abs_diff(mixed[1], alone0[0]), 1e-4f);
  EXPECT_LT(max_abs_diff(mixed[2], alone1[0]), 1e-4f);
  EXPECT_LT(max_abs_diff(mixed[3], alone2[0]), 1e-4f);
  EXPECT_LT(max_abs_diff(alone2[0], merged2[0]), 2e-3f);
  EXPECT_GT(max_abs_diff(alone1[0], alone0[0]), 1e-3f);
}

// A hand-made adapter: tensors (name, ne0, ne1), metadata as given.
// `poison`: one element of the last tensor (0: none); `alpha`: adapter.lora.alpha.
std::string write_adapter(const std::string& name, const std::vector<std::tuple<std::string, int64_t, int64_t>>& tensors,
                          const std::string& type = "adapter", float poison = 0.0f, float alpha = 4.0f) {
  gguf::GgufBuilder b;
  b.set_string("general.architecture", "llama");
  b.set_string("general.type", type);
  b.set_string("adapter.type", "lora");
  b.set_f32("adapter.lora.alpha", alpha);
  for (size_t k = 0; k < tensors.size(); ++k) {
    const auto& [n, ne0, ne1] = tensors[k];
    const float bad = k + 1 == tensors.size() ? poison : 0.0f;
    EXPECT_TRUE(b.add_tensor(n, DType::f32, ne0, ne1, [ne0 = ne0, bad](uint8_t* dst, int64_t begin, int64_t end) {
                   std::memset(dst, 0, static_cast<size_t>((end - begin) * ne0) * sizeof(float));
                   if (bad != 0.0f && end > begin) std::memcpy(dst + sizeof(float), &bad, sizeof bad);
                 }).ok());
  }
  const std::string path = temp_path(name);
  EXPECT_TRUE(b.write_file(path).ok());
  return path;
}

TEST_F(LoraTest, BadAdaptersAreRefusedWithTheReason) {
  auto w = load(testing::stories_path(), true, /*max_rank=*/8);
  ASSERT_NE(w.worker, nullptr);
  const int64_t E = w.worker->model_info()->hidden_size;
  const std::string q = "blk.0.attn_q.weight";
  struct Case {
    std::string file;
    std::string want;
  };
  std::vector<Case> cases = {
      {temp_path("missing.gguf"), "no such file"},
      {write_adapter("rank.gguf", {{q + ".lora_a", E, 32}, {q + ".lora_b", 32, E}}), "larger than --max-lora-rank 8"},
      {write_adapter("name.gguf", {{"blk.0.attn_zz.weight.lora_a", E, 4}, {"blk.0.attn_zz.weight.lora_b", 4, E}}),
       "which the base model does not have"},
      {write_adapter("shape.gguf", {{q + ".lora_a", E + 1, 4}, {q + ".lora_b", 4, E}}), "shape mismatch"},
      {write_adapter("ranks.gguf", {{q + ".lora_a", E, 4}, {q + ".lora_b", 2, E}}), "differ"},
      {write_adapter("half.gguf", {{q + ".lora_a", E, 4}}), ".lora_b is missing"},
      {write_adapter("odd.gguf", {{q + ".lora_x", E, 4}}), "neither"},
      {write_adapter("norm.gguf", {{"output_norm.weight.lora_a", E, 1}, {"output_norm.weight.lora_b", 1, 1}}),
       "does not apply LoRA to it"},
      {write_adapter("type.gguf", {{q + ".lora_a", E, 4}, {q + ".lora_b", 4, E}}, "model"), "expected 'adapter'"},
      {testing::stories_path(), "general.type"},
      {write_adapter("nan.gguf", {{q + ".lora_a", E, 4}, {q + ".lora_b", 4, E}}, "adapter", std::nanf("")),
       "tensor " + q + ".lora_b has a non-finite value"},
      {write_adapter("inf.gguf", {{q + ".lora_a", E, 4}, {q + ".lora_b", 4, E}}, "adapter", INFINITY),
       "tensor " + q + ".lora_b has a non-finite value (inf)"},
      {write_adapter("alpha.gguf", {{q + ".lora_a", E, 4}, {q + ".lora_b", 4, E}}, "adapter", 0.0f, 1e30f),
       "adapter.lora.alpha is 10000000150"},
      {write_adapter("alpha_nan.gguf", {{q + ".lora_a", E, 4}, {q + ".lora_b", 4, E}}, "adapter", 0.0f, std::nanf("")),
       "adapter.lora.alpha is "},
      {std::filesystem::temp_directory_path().string(), "is a directory"},
      {"/dev/zero", "is not a regular file"},
  };
  for (const Case& c : cases) {
    Status s = add(w, 7, c.file);
    EXPECT_FALSE(s.ok()) << c.file;
    EXPECT_NE(s.message().find(c.want), std::string::npos) << c.file << ": " << s.message();
    if (c.file.find(".gguf") != std::string::npos && c.file != testing::stories_path()) std::remove(c.file.c_str());
  }
  EXPECT_TRUE(find_extension<LoraExtension>(*w.worker)->list_loras()->empty());
}

}  // namespace
}  // namespace troupe
