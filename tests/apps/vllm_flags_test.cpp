// `vllm serve` command lines against a real `troupe serve`: the flags a deployment
// commonly passes either run (the server answers as they say) or stop start-up with one
// line naming the flag and why (README's "vLLM flags" table).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;

TEST(VllmFlags, AVllmStyleCommandLineRuns) {
  ServeProcess server({"--dtype", "auto", "--quantization", "gguf", "--enable-chunked-prefill", "--trust-remote-code",
                       "--generation-config", "vllm", "--max-num-seqs", "8", "--max-model-len", "256",
                       "--gpu-memory-utilization", "0.5", "--tensor-parallel-size", "1", "--served-model-name",
                       "my-model", "--api-key", "secret-key", "--disable-log-requests", "--uvicorn-log-level",
                       "info", "--swap-space", "4", "--disable-custom-all-reduce", "--disable-log-stats"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  const std::string log = server.log();
  EXPECT_NE(log.find("--trust-remote-code has no effect"), std::string::npos) << log;
  EXPECT_NE(log.find("--swap-space has no effect"), std::string::npos) << log;
  // --api-key: refused without the key, answered with it.
  auto no_key = apps::http::request("127.0.0.1", server.port(), "GET", "/v1/models", "", {}, {}, std::chrono::seconds(10));
  ASSERT_TRUE(no_key.ok());
  EXPECT_EQ(no_key->status, 401);
  auto models = apps::http::request("127.0.0.1", server.port(), "GET", "/v1/models", "",
                                    {{"Authorization", "Bearer secret-key"}}, {}, std::chrono::seconds(10));
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->status, 200) << models->body;
  const json m = json::parse(models->body);
  EXPECT_EQ(m["data"][0]["id"], "my-model");          // --served-model-name
  EXPECT_EQ(m["data"][0]["max_model_len"], 256);       // --max-model-len
  EXPECT_EQ(server.stop(), 0);
}

// The last non-empty line of the log.
std::string last_line(const std::string& log) {
  std::istringstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

TEST(VllmFlags, FlagsTroupeCannotHonourStopStartUpWithOneLine) {
  struct Case {
    std::vector<std::string> args;
    std::string names;  // the start of the message: the flag (and its value)
  };
  const std::vector<Case> cases = {
      {{"--dtype", "float16"}, "--dtype float16: "},
      {{"--dtype", "bfloat16"}, "--dtype bfloat16: "},
      {{"--quantization", "awq"}, "--quantization awq: not a registered load-time method"},
      {{"--no-enable-chunked-prefill"}, "--no-enable-chunked-prefill: "},
      {{"--generation-config", "/nonexistent-folder"}, "--generation-config /nonexistent-folder: not a folder"},
      {{"--reasoning-parser", "nope"},
       "--reasoning-parser nope: reasoning parser 'nope' is not registered (known: deepseek_r1, qwen3)"},
      {{"--tokenizer", "meta-llama/Llama-3.2-1B"}, "--tokenizer meta-llama/Llama-3.2-1B: "},
      {{"--pooler-config", "{\"pooling_type\":\"CLS\"}"}, "--pooler-config {\"pooling_type\":\"CLS\"}: not implemented yet"},
      {{"--revision", "main"}, "--revision main: "},
      {{"--download-dir", "/tmp/x"}, "--download-dir /tmp/x: "},
      {{"--uvicorn-log-level", "loud"}, "--uvicorn-log-level loud: "},
      {{"--ssl-keyfile", "/tmp/k.pem"}, "--ssl-keyfile: "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.names);
    ServeProcess server(c.args);
    EXPECT_FALSE(server.wait_healthy(std::chrono::seconds(30)));
    EXPECT_EQ(server.stop(), 1);
    const std::string log = server.log();
    EXPECT_EQ(last_line(log).rfind("troupe serve: error: " + c.names, 0), 0u) << log;
    EXPECT_EQ(log.find("listening"), std::string::npos) << "the refusal comes before the port opens: " << log;
  }
}

}  // namespace
}  // namespace troupe::tests
