// generation_config.json's sampling defaults through a real `troupe serve` on loopback
// (vLLM's --generation-config): the folder named by --generation-config (here next to
// the stories260K GGUF) says max_new_tokens 5, top_k 1 and temperature 1.7. A request that
// sets nothing gets 5 tokens, the same text whatever its seed (top_k 1); a request's own
// fields win; eos_token_id stops generation; --generation-config vllm ignores the file;
// --served-model-name takes several names (the first reported, all accepted).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/apps/serve_process.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string write_generation_config(const std::string& name, const json& config) {
  const std::string dir = (fs::temp_directory_path() / ("troupe_gencfg_" + std::to_string(::getpid()) + "_" + name)).string();
  fs::create_directories(dir);
  std::ofstream(dir + "/generation_config.json") << config.dump(2);
  return dir;
}

json complete(const tests::ServeProcess& s, json body) {
  body["prompt"] = "Once upon a time";
  return tests::post_json(s, "/v1/completions", body);
}

TEST(GenerationConfigHttp, FolderDefaultsApplyUnlessTheRequestSetsThem) {
  const std::string dir =
      write_generation_config("defaults", {{"max_new_tokens", 5}, {"top_k", 1}, {"temperature", 1.7}, {"top_p", 1.0}});
  tests::ServeProcess server({"--generation-config", dir, "--max-model-len", "128", "--served-model-name", "first",
                              "second"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  std::set<std::string> texts;
  for (int seed : {1, 2, 3}) {
    const json r = complete(server, {{"seed", seed}, {"model", seed == 2 ? "second" : "first"}});
    ASSERT_TRUE(r.contains("usage")) << r.dump();
    EXPECT_EQ(r["usage"]["completion_tokens"], 5) << r.dump();  // max_new_tokens
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r["model"], "first");  // the first --served-model-name is reported
    texts.insert(r["choices"][0]["text"].get<std::string>());
  }
  EXPECT_EQ(texts.size(), 1u) << "top_k 1 from generation_config.json makes any seed greedy";
  // The request's own fields win: 9 tokens, and top_k -1 at temperature 1.7 samples.
  std::set<std::string> sampled;
  for (int seed : {1, 2, 3, 4}) {
    const json r = complete(server, {{"seed", seed}, {"max_tokens", 9}, {"top_k", -1}});
    EXPECT_EQ(r["usage"]["completion_tokens"], 9) << r.dump();
    sampled.insert(r["choices"][0]["text"].get<std::string>());
  }
  EXPECT_GT(sampled.size(), 1u) << "temperature 1.7 over the whole vocabulary gave one text for 4 seeds";
  const json unknown = tests::post_json(server, "/v1/completions", {{"prompt", "x"}, {"model", "third"}}, 404);
  EXPECT_NE(unknown.dump().find("third"), std::string::npos);
  EXPECT_EQ(server.stop(), 0);
  fs::remove_all(dir);
}

TEST(GenerationConfigHttp, EosTokenIdsStopAndVllmModeIgnoresTheFile) {
  // The greedy continuation's third token becomes an end-of-sequence id.
  const std::string greedy_dir = write_generation_config("greedy", {{"max_new_tokens", 6}, {"top_k", 1}});
  int third = -1;
  {
    tests::ServeProcess server({"--generation-config", greedy_dir, "--max-model-len", "128"});
    ASSERT_TRUE(server.wait_healthy()) << server.log();
    const json r = complete(server, {{"return_token_ids", true}});
    ASSERT_TRUE(r["choices"][0].contains("token_ids")) << r.dump();
    ASSERT_GE(r["choices"][0]["token_ids"].size(), 3u) << r.dump();
    third = r["choices"][0]["token_ids"][2].get<int>();
    EXPECT_EQ(server.stop(), 0);
  }
  const std::string eos_dir =
      write_generation_config("eos", {{"max_new_tokens", 6}, {"top_k", 1}, {"eos_token_id", {2, third}}});
  {
    tests::ServeProcess server({"--generation-config", eos_dir, "--max-model-len", "128"});
    ASSERT_TRUE(server.wait_healthy()) << server.log();
    const json r = complete(server, {{"return_token_ids", true}});
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
    EXPECT_EQ(r["usage"]["completion_tokens"], 3) << r.dump();
    // ignore_eos: the list does not stop it.
    const json ignoring = complete(server, {{"ignore_eos", true}});
    EXPECT_EQ(ignoring["usage"]["completion_tokens"], 6) << ignoring.dump();
    EXPECT_EQ(server.stop(), 0);
  }
  {
    tests::ServeProcess server({"--generation-config", "vllm", "--max-model-len", "128"});
    ASSERT_TRUE(server.wait_healthy()) << server.log();
    const json r = complete(server, {{"temperature", 0}});
    EXPECT_GT(r["usage"]["completion_tokens"].get<int>(), 6) << r.dump();  // no max_new_tokens: fills the context
    EXPECT_EQ(server.stop(), 0);
  }
  fs::remove_all(greedy_dir);
  fs::remove_all(eos_dir);
}

}  // namespace
}  // namespace troupe
