// generation_config.json's sampling defaults through a real `troupe serve` on loopback
// (vLLM's --generation-config): the folder named by --generation-config (here next to
// the stories260K GGUF) says max_new_tokens 5, top_k 1 and temperature 1.7. A request that
// sets nothing gets 5 tokens, the same text whatever its seed (top_k 1); a request's own
// fields win; eos_token_id stops generation; --generation-config vllm ignores the file;
// --served-model-name takes several names (the first reported, all accepted).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
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

// `troupe make-gguf --hf-folder` writes a model both ways; `troupe serve DIR` answers with the
// folder's path as its name and the folder's generation_config.json in effect, and `troupe
// generate` gives the GGUF's greedy text from the folder.
std::string sh(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd.find(" 2>") == std::string::npos ? cmd + " 2>&1" : cmd).c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(GenerationConfigHttp, ServesAHuggingFaceFolder) {
  const std::string base = (fs::temp_directory_path() / ("troupe_hf_serve_" + std::to_string(::getpid()))).string();
  const std::string gguf = base + ".gguf", dir = base + "-folder";
  const std::string made = sh(std::string(TROUPE_EXE) + " make-gguf --model-shape tiny-qwen2 --weight-type f32 --seed 3 -o " +
                              gguf + " --hf-folder " + dir + " --shards 2 --generation-config-json " +
                              "'{\"max_new_tokens\": 4, \"top_k\": 1, \"temperature\": 1.5}'");
  ASSERT_TRUE(fs::exists(dir + "/model.safetensors.index.json")) << made;
  ASSERT_TRUE(fs::exists(dir + "/tokenizer.json")) << made;
  {
    tests::ServeProcess server({"--max-model-len", "128"}, dir);
    ASSERT_TRUE(server.wait_healthy()) << server.log();
    std::set<std::string> texts;
    for (int seed : {1, 2}) {
      const json r = complete(server, {{"seed", seed}});
      EXPECT_EQ(r["usage"]["completion_tokens"], 4) << r.dump();  // max_new_tokens
      EXPECT_EQ(r["model"], dir);                                  // vLLM: the path as given
      texts.insert(r["choices"][0]["text"].get<std::string>());
    }
    EXPECT_EQ(texts.size(), 1u);  // top_k 1
    EXPECT_EQ(server.stop(), 0);
  }
  const std::string args = " -p 'Once upon a time' -n 12 --threads 1";
  const std::string from_gguf = sh(std::string(TROUPE_EXE) + " generate " + gguf + args + " --json 2>/dev/null");
  const std::string from_dir = sh(std::string(TROUPE_EXE) + " generate " + dir + args + " --json 2>/dev/null");
  const json a = json::parse(from_gguf.substr(from_gguf.find('{')), nullptr, false);
  const json b = json::parse(from_dir.substr(from_dir.find('{')), nullptr, false);
  ASSERT_FALSE(a.is_discarded()) << from_gguf;
  ASSERT_FALSE(b.is_discarded()) << from_dir;
  EXPECT_EQ(a.value("text", "a"), b.value("text", "b")) << from_gguf << "\n" << from_dir;
  fs::remove_all(dir);
  fs::remove(gguf);
}

}  // namespace
}  // namespace troupe
