// `troupe serve` on the out-of-tree sim accelerator, over real HTTP on
// loopback: the server activates the sim, keeps the model in its memory, and
// a greedy completion equals the one the CPU platform serves. The sim offers
// Ops::select_tokens, so its tokens are chosen in its memory and only ids come
// out: a seeded top_p completion equals the CPU's host sampler's too, and
// breaking the sim's select_tokens on purpose changes what it serves.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/apps/serve_process.hpp"

namespace troupe::tests {
namespace {

const nlohmann::json kGreedy = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 24},
                                {"temperature", 0}};
// Random sampling whose draw the host and the device make alike (top_p < 1, a seed).
const nlohmann::json kSeededTopP = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 24},
                                    {"temperature", 0.9}, {"top_p", 0.9}, {"seed", 1234}};

std::string complete(int port, const nlohmann::json& body = kGreedy) {
  auto r = apps::http::request("127.0.0.1", port, "POST", "/v1/completions", body.dump(),
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r->body;
  if (j.is_discarded()) return "";
  return j["choices"][0]["text"].get<std::string>();
}

struct CpuTexts {
  std::string greedy, seeded;
};

CpuTexts cpu_texts() {
  ::unsetenv("TROUPE_PLUGINS");
  ::unsetenv("TROUPE_DEVICE");
  ::unsetenv("TROUPE_PLUGIN_PATH");
  ::unsetenv("SIM_ACCEL_BREAK_OP");
  ServeProcess cpu({"--served-model-name", "stories", "--max-model-len", "256"});
  EXPECT_TRUE(cpu.wait_healthy()) << cpu.log();
  return {complete(cpu.port()), complete(cpu.port(), kSeededTopP)};
}

TEST(SimServe, GreedyCompletionOverHttpEqualsTheCpus) {
  const CpuTexts cpu = cpu_texts();
  ::setenv("TROUPE_PLUGIN_PATH", SIM_PLUGIN_DIR, 1);
  ServeProcess sim({"--served-model-name", "stories", "--max-model-len", "256"});
  ASSERT_TRUE(sim.wait_healthy()) << sim.log();
  const std::string sim_text = complete(sim.port());
  EXPECT_FALSE(sim_text.empty());
  EXPECT_EQ(sim_text, cpu.greedy);
  const std::string sim_seeded = complete(sim.port(), kSeededTopP);
  EXPECT_FALSE(sim_seeded.empty());
  EXPECT_NE(sim_seeded, sim_text);  // it did sample
  EXPECT_EQ(sim_seeded, cpu.seeded);
  EXPECT_EQ(sim.stop(), 0);
  const std::string log = sim.log();
  EXPECT_NE(log.find("Platform plugin sim is activated"), std::string::npos) << log;
  EXPECT_NE(log.find("memory sim:0, attention sim_paged"), std::string::npos) << log;
}

// The tokens come from the sim's select_tokens: a sim that picks the wrong one serves other text.
TEST(SimServe, TokensAreChosenOnTheDevice) {
  const CpuTexts cpu = cpu_texts();
  ::setenv("TROUPE_PLUGIN_PATH", SIM_PLUGIN_DIR, 1);
  ::setenv("SIM_ACCEL_BREAK_OP", "select_tokens", 1);
  ServeProcess sim({"--served-model-name", "stories", "--max-model-len", "256"});
  ::unsetenv("SIM_ACCEL_BREAK_OP");
  ASSERT_TRUE(sim.wait_healthy()) << sim.log();
  EXPECT_NE(complete(sim.port()), cpu.greedy);
  EXPECT_NE(complete(sim.port(), kSeededTopP), cpu.seeded);
  // A request with logprobs needs the logits: they are copied out and the host samples it.
  nlohmann::json with_logprobs = kGreedy;
  with_logprobs["logprobs"] = 1;
  EXPECT_EQ(complete(sim.port(), with_logprobs), cpu.greedy);
  EXPECT_EQ(sim.stop(), 0);
}

}  // namespace
}  // namespace troupe::tests
