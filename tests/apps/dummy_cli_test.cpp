// The dummy load format through the real CLI: `troupe generate --load-format
// dummy`, `troupe make-gguf` whose file generates the same tokens, `troupe
// serve --load-format dummy` answering a chat completion, and clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/apps/serve_process.hpp"
#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
using testing::run_troupe;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string temp_path(const std::string& tag) {
  return "/tmp/troupe_dummy_cli_" + std::to_string(::getpid()) + "_" + tag + ".gguf";
}

json generate_json(const std::string& model_args) {
  auto r = run_troupe("generate " + model_args + " -p 'Once upon a time' -n 12 --json --threads 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(DummyCli, GenerateRunsAndMakeGgufWritesTheSameModel) {
  const std::string dummy = "--load-format dummy --model-shape tiny --weight-type q4_1 --seed 3";
  const json a = generate_json(dummy);
  ASSERT_TRUE(a.contains("token_ids")) << a.dump();
  EXPECT_FALSE(a["token_ids"].empty());
  EXPECT_EQ(generate_json(dummy)["token_ids"], a["token_ids"]);  // deterministic

  const std::string path = temp_path("tiny_q4_1");
  auto made = run_troupe("make-gguf --model-shape tiny --weight-type q4_1 --seed 3 -o " + path);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_TRUE(contains(made.out, "wrote " + path)) << made.out;
  const json b = generate_json(path);
  std::remove(path.c_str());
  EXPECT_EQ(b["prompt_token_ids"], a["prompt_token_ids"]);
  EXPECT_EQ(b["token_ids"], a["token_ids"]);
  EXPECT_EQ(b["text"], a["text"]);

  const json other = generate_json("--load-format dummy --model-shape tiny --weight-type q4_1 --seed 4");
  EXPECT_EQ(other["prompt_token_ids"], a["prompt_token_ids"]);  // same tokenizer
}

TEST(DummyCli, BadNamesAndCombinationsAreClearErrors) {
  auto shape = run_troupe("generate --load-format dummy --model-shape llama-7 -p hi");
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_TRUE(contains(shape.err, "unknown model shape 'llama-7'")) << shape.err;
  EXPECT_TRUE(contains(shape.err, "llama-3.2-1b") && contains(shape.err, "smollm2-135m")) << shape.err;

  auto type = run_troupe("generate --load-format dummy --model-shape tiny --weight-type iq2_xxs -p hi");
  EXPECT_EQ(type.exit_code, 1);
  EXPECT_TRUE(contains(type.err, "unknown weight type 'iq2_xxs'") && contains(type.err, "q4_1")) << type.err;

  auto fit = run_troupe("make-gguf --model-shape smollm2-135m --weight-type q6_k -o " + temp_path("never"));
  EXPECT_EQ(fit.exit_code, 1);
  EXPECT_TRUE(contains(fit.err, "576")) << fit.err;

  auto no_shape = run_troupe("generate --load-format dummy -p hi");
  EXPECT_EQ(no_shape.exit_code, 1);
  EXPECT_TRUE(contains(no_shape.err, "needs --model-shape")) << no_shape.err;

  auto both = run_troupe("generate " + std::string(TROUPE_TEST_DATA_DIR) +
                         "/stories260K.gguf --load-format dummy --model-shape tiny -p hi");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_TRUE(contains(both.err, "give no MODEL")) << both.err;

  auto shape_alone = run_troupe("generate --model-shape tiny -p hi");
  EXPECT_EQ(shape_alone.exit_code, 1);
  EXPECT_TRUE(contains(shape_alone.err, "need --load-format dummy")) << shape_alone.err;

  auto format = run_troupe("serve --load-format pt --model-shape tiny");
  EXPECT_EQ(format.exit_code, 1);
  EXPECT_TRUE(contains(format.err, "auto, dummy")) << format.err;

  auto list = run_troupe("make-gguf --list");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_TRUE(contains(list.out, "llama-3.2-1b") && contains(list.out, "128256")) << list.out;
}

TEST(DummyCli, ServeAnswersWithTheDummyModel) {
  tests::ServeProcess server({"--load-format", "dummy", "--model-shape", "tiny", "--weight-type", "q8_0",
                              "--disable-log-stats"},
                             tests::kNoModel);
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  auto models = apps::http::request("127.0.0.1", server.port(), "GET", "/v1/models", "", {}, {},
                                    std::chrono::seconds(30));
  ASSERT_TRUE(models.ok());
  EXPECT_TRUE(contains(models->body, "tiny-q8_0-dummy")) << models->body;
  json body = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 5}, {"temperature", 0}};
  auto chat = apps::http::request("127.0.0.1", server.port(), "POST", "/v1/chat/completions", body.dump(),
                                  {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->status, 200) << chat->body;
  json j = json::parse(chat->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << chat->body;
  EXPECT_GE(j["usage"]["completion_tokens"].get<int>(), 1) << chat->body;
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 5) << chat->body;  // the ChatML template's tokens
}

}  // namespace
}  // namespace troupe
