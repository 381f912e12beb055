// `troupe platform-check` through the real CLI: on the CPU platform, on the
// out-of-tree sim accelerator, with an op of the sim broken on purpose, with
// --filter, and with a platform that does not exist.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

using testing::run_troupe;

const std::string kSim = std::string("env -u TROUPE_PLUGINS -u TROUPE_DEVICE TROUPE_PLUGIN_PATH=") + SIM_PLUGIN_DIR;
const std::string kCpuOnly = "env -u TROUPE_PLUGINS -u TROUPE_DEVICE -u TROUPE_PLUGIN_PATH";

nlohmann::json parse(const testing::CmdResult& r) {
  auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\n" << r.err;
  return j;
}

/// The ops that failed, by group.
std::set<std::string> failed_ops(const nlohmann::json& j, const std::string& group) {
  std::set<std::string> ops;
  for (const auto& c : j["cases"])
    if (c["result"] == "fail" && c["group"] == group) ops.insert(c["op"].get<std::string>());
  return ops;
}

// Every group of checks ran and passed; the worker contract matched the goldens.
void expect_complete_pass(const nlohmann::json& j, const std::string& platform) {
  EXPECT_EQ(j["platform"], platform);
  EXPECT_EQ(j["reference"], "cpu");
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["counts"]["fail"], 0);
  std::set<std::string> groups, ops;
  for (const auto& c : j["cases"]) {
    groups.insert(c["group"].get<std::string>());
    ops.insert(c["op"].get<std::string>());
  }
  for (const char* g : {"ops", "attention", "communicator", "worker", "feature"}) EXPECT_TRUE(groups.count(g)) << g;
  for (const char* op : {"matmul", "matmul_multi", "matmul_silu_mul", "embedding", "rms_norm", "rope", "rope_neox",
                         "silu_mul", "add_inplace", "layer_norm", "gelu", "add_bias", "dense_attention",
                         "paged_attention", "all_reduce", "all_gather", "reduce_scatter", "gather", "broadcast",
                         "init_device", "load_model", "get_kv_cache_spec", "determine_available_memory",
                         "initialize_from_config", "compile_or_warm_up_model", "execute_model"})
    EXPECT_TRUE(ops.count(op)) << op;
  // ModelRunnerWorker offers sleep mode and LoRA on every platform built on it; draft
  // tokens are not offered yet.
  for (const auto& c : j["cases"]) {
    if (c["group"] != "feature") continue;
    EXPECT_EQ(c["result"], c["op"] == "draft_tokens" ? "not offered" : "pass") << c["op"];
  }
  EXPECT_FALSE(j["speeds"].empty());
}

TEST(PlatformCheck, CpuPassesAgainstItself) {
  auto r = run_troupe("platform-check --platform cpu --json --threads 2", kCpuOnly);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = parse(r);
  expect_complete_pass(j, "cpu");
  std::set<std::string> types;
  for (const auto& c : j["cases"])
    if (c["op"] == "matmul") types.insert(c["dtype"].get<std::string>());
  for (const char* t : {"f32", "f16", "bf16", "q4_0", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"})
    EXPECT_TRUE(types.count(t)) << t;
}

TEST(PlatformCheck, SimAcceleratorPasses) {
  if (!TROUPE_HAVE_EXAMPLES) GTEST_SKIP() << "examples are not built";
  auto r = run_troupe("platform-check --platform sim --json", kSim);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = parse(r);
  expect_complete_pass(j, "sim");
  // Only the weight types the sim computes; the model's weights went to its memory.
  std::set<std::string> types;
  for (const auto& c : j["cases"])
    if (c["op"] == "matmul") types.insert(c["dtype"].get<std::string>());
  EXPECT_EQ(types, (std::set<std::string>{"f32", "f16", "bf16"}));
  EXPECT_NE(r.err.find("MiB of weights on sim:0"), std::string::npos) << r.err;
  // The sim offers RoPE with frequency factors (Llama 3.x's rope_freqs): its cases ran.
  int rope_factor_cases = 0;
  for (const auto& c : j["cases"]) rope_factor_cases += c["op"] == "rope_freq_factors.v1";
  EXPECT_EQ(rope_factor_cases, 12);
}

TEST(PlatformCheck, TheTableEndsWithASummaryAndTheDefaultIsTheActivePlatform) {
  if (!TROUPE_HAVE_EXAMPLES) GTEST_SKIP() << "examples are not built";
  // No --platform: the out-of-tree sim is what troupe activates.
  auto r = run_troupe("platform-check --filter rms_norm", kSim);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("platform sim"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rms_norm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GB/s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("matmul"), std::string::npos) << "--filter rms_norm ran matmul:\n" << r.out;
  EXPECT_NE(r.out.find(": PASS"), std::string::npos) << r.out;
}

// A deliberately wrong op makes the check fail and name exactly that op.
TEST(PlatformCheck, ABrokenOpFailsTheCheckAndIsNamed) {
  if (!TROUPE_HAVE_EXAMPLES) GTEST_SKIP() << "examples are not built";
  for (const std::string op : {"rms_norm", "paged_attention", "rope", "all_gather", "select_tokens"}) {
    SCOPED_TRACE(op);
    auto r = run_troupe("platform-check --platform sim --json --no-speed", kSim + " SIM_ACCEL_BREAK_OP=" + op);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const auto j = parse(r);
    EXPECT_FALSE(j["passed"].get<bool>());
    const std::string group = op == "paged_attention" ? "attention" : op == "all_gather" ? "communicator" : "ops";
    const auto failed = failed_ops(j, group);
    // rope breaks both rope variants; every other op only itself.
    const std::set<std::string> want = op == "rope" ? std::set<std::string>{"rope", "rope_neox"} : std::set<std::string>{op};
    EXPECT_EQ(failed, want);
    for (const std::string other : {"ops", "attention", "communicator"}) {
      if (other != group) {
        EXPECT_TRUE(failed_ops(j, other).empty()) << other;
      }
    }
    for (const auto& c : j["cases"])
      if (c["result"] == "fail" && c["group"] == group) {
        EXPECT_FALSE(c["shape"].get<std::string>().empty());
        EXPECT_FALSE(c["dtype"].get<std::string>().empty());
        EXPECT_GT(c["worst_error"].get<double>(), c["tolerance"].get<double>());
      }
  }
  // The readable table names it too.
  auto r = run_troupe("platform-check --platform sim --no-speed --filter rms_norm", kSim + " SIM_ACCEL_BREAK_OP=rms_norm");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("Failed ops: rms_norm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": FAIL"), std::string::npos) << r.out;
}

TEST(PlatformCheck, BadInputIsAClearError) {
  auto unknown = run_troupe("platform-check --platform tpu9", kCpuOnly);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no platform plugin provides it"), std::string::npos) << unknown.err;
  auto nothing = run_troupe("platform-check --platform cpu --filter no_such_op", kCpuOnly);
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_NE(nothing.err.find("no check matches --filter 'no_such_op'"), std::string::npos) << nothing.err;
  auto missing = run_troupe("platform-check --platform cpu --filter execute_model --model /nonexistent.gguf", kCpuOnly);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("/nonexistent.gguf: no such file"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace troupe
