// `troupe serve` on the out-of-tree sim accelerator, over real HTTP on
// loopback: the server activates the sim, keeps the model in its memory, and
// a greedy completion equals the one the CPU platform serves.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/apps/serve_process.hpp"

namespace troupe::tests {
namespace {

std::string complete(int port) {
  const nlohmann::json body = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 24},
                               {"temperature", 0}};
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

TEST(SimServe, GreedyCompletionOverHttpEqualsTheCpus) {
  ::unsetenv("TROUPE_PLUGINS");
  ::unsetenv("TROUPE_DEVICE");
  ::unsetenv("TROUPE_PLUGIN_PATH");
  std::string cpu_text;
  {
    ServeProcess cpu({"--served-model-name", "stories", "--max-model-len", "256"});
    ASSERT_TRUE(cpu.wait_healthy()) << cpu.log();
    cpu_text = complete(cpu.port());
  }
  ::setenv("TROUPE_PLUGIN_PATH", SIM_PLUGIN_DIR, 1);
  ServeProcess sim({"--served-model-name", "stories", "--max-model-len", "256"});
  ASSERT_TRUE(sim.wait_healthy()) << sim.log();
  const std::string sim_text = complete(sim.port());
  EXPECT_FALSE(sim_text.empty());
  EXPECT_EQ(sim_text, cpu_text);
  EXPECT_EQ(sim.stop(), 0);
  const std::string log = sim.log();
  EXPECT_NE(log.find("Platform plugin sim is activated"), std::string::npos) << log;
  EXPECT_NE(log.find("memory sim:0, attention sim_paged"), std::string::npos) << log;
}

}  // namespace
}  // namespace troupe::tests
