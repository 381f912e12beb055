// --reasoning-parser through real `troupe serve` processes with SmolLM2
// (TROUPE_TEST_MODEL): the chat answer's reasoning_content and content are the model's
// own greedy text (the same prompt through /v1/completions) split at </think> as
// vLLM splits it, whole and streamed; qwen3 with enable_thinking false answers in
// content; include_reasoning false drops the reasoning; structured outputs stay content.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"
#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

// What the model writes for `messages` (greedy): the rendered prompt's tokens through
// /v1/completions, which no reasoning parser touches.
std::string raw_answer(const tests::ServeProcess& s, const json& messages, int max_tokens,
                       const json& kwargs = json::object(), const json& extra = json::object()) {
  json tokens = tests::post_json(s, "/tokenize",
                                 {{"messages", messages}, {"add_generation_prompt", true}, {"chat_template_kwargs", kwargs}});
  json body = {{"prompt", tokens["tokens"]}, {"max_tokens", max_tokens}, {"temperature", 0}};
  body.update(extra);
  json r = tests::post_json(s, "/v1/completions", body);
  return r["choices"][0]["text"].get<std::string>();
}

// vLLM's deepseek_r1 split, written out here: reasoning up to </think> (the first
// <think> before it dropped), the rest content (null when empty); no </think>: all
// reasoning.
struct Split {
  std::optional<std::string> reasoning, content;
};
Split r1_split(const std::string& raw) {
  const size_t end = raw.find("</think>");
  std::string reasoning = end == std::string::npos ? raw : raw.substr(0, end);
  if (size_t start = reasoning.find("<think>"); start != std::string::npos) reasoning.erase(start, 7);
  Split s{reasoning, std::nullopt};
  if (end != std::string::npos && end + 8 < raw.size()) s.content = raw.substr(end + 8);
  return s;
}

json opt(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

struct Streamed {
  std::string reasoning, content, finish_reason;
  bool any_reasoning_field = false;
};

Streamed stream_chat(const tests::ServeProcess& server, json body) {
  body["stream"] = true;
  Streamed out;
  http::SseParser sse;
  auto s = http::request("127.0.0.1", server.port(), "POST", "/v1/chat/completions", body.dump(),
                         {{"Content-Type", "application/json"}},
                         [&](std::string_view piece) {
                           sse.feed(piece, [&](std::string_view d) {
                             if (d == "[DONE]") return;
                             json chunk = json::parse(d, nullptr, false);
                             if (!chunk.is_object() || chunk["choices"].empty()) return;
                             const json& choice = chunk["choices"][0];
                             const json& delta = choice["delta"];
                             if (delta.contains("reasoning_content")) {
                               out.any_reasoning_field = true;
                               EXPECT_EQ(delta["reasoning"], delta["reasoning_content"]);
                               out.reasoning += delta["reasoning_content"].get<std::string>();
                             }
                             if (delta.contains("content") && delta["content"].is_string())
                               out.content += delta["content"].get<std::string>();
                             if (choice["finish_reason"].is_string()) out.finish_reason = choice["finish_reason"];
                           });
                           return true;
                         },
                         std::chrono::seconds(120));
  EXPECT_TRUE(s.ok());
  return out;
}

json chat_body(const json& messages, int max_tokens) {
  return {{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// Checks one conversation: the whole and the streamed answer split the raw text as vLLM.
void expect_split_answer(const tests::ServeProcess& s, const json& messages, int max_tokens, bool want_end_tag,
                         const json& extra = json::object()) {
  const std::string raw = raw_answer(s, messages, max_tokens, json::object(), extra);
  SCOPED_TRACE("raw: " + raw);
  if (want_end_tag) {
    ASSERT_NE(raw.find("</think>"), std::string::npos) << "the prompt no longer draws </think>";
  }
  const Split want = r1_split(raw);
  json body = chat_body(messages, max_tokens);
  body.update(extra);
  json r = tests::post_json(s, "/v1/chat/completions", body);
  const json& message = r["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], opt(want.reasoning)) << r.dump();
  EXPECT_EQ(message["reasoning"], message["reasoning_content"]);
  EXPECT_EQ(message["content"], opt(want.content)) << r.dump();
  Streamed st = stream_chat(s, body);
  EXPECT_EQ(st.reasoning, want.reasoning.value_or(""));
  EXPECT_EQ(st.content, want.content.value_or(""));
  EXPECT_EQ(st.finish_reason, r["choices"][0]["finish_reason"]);
}

class ReasoningHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared_.start({"--max-model-len", "1024", "--reasoning-parser", "deepseek_r1", "--enable-auto-tool-choice",
                   "--tool-call-parser", "hermes"});
  }
  static void TearDownTestSuite() { shared_.stop(); }
  void SetUp() override { TROUPE_REQUIRE_SERVER(shared_); }
  static tests::SharedModelServer shared_;
};
tests::SharedModelServer ReasoningHttp::shared_;

TEST_F(ReasoningHttp, AnswerWithoutEndTagIsAllReasoning) {
  expect_split_answer(*shared_, {{{"role", "user"}, {"content", "What is the capital of France?"}}}, 24, false);
}

TEST_F(ReasoningHttp, EndTagSplitsReasoningFromContent) {
  // SmolLM2 writes no tags of its own: its answer is held to the tokens of
  // "</think>Blue sky." (allowed_token_ids), which it strings into reasoning, </think>
  // and more after it.
  json tokens = tests::post_json(*shared_, "/tokenize", {{"prompt", "</think>Blue sky."}, {"add_special_tokens", false}});
  const json extra = {{"allowed_token_ids", tokens["tokens"]}};
  const json messages = {{{"role", "user"}, {"content", "Think, then say: </think>Blue sky."}}};
  expect_split_answer(*shared_, messages, 12, true, extra);
}

TEST_F(ReasoningHttp, IncludeReasoningFalseAndStructuredOutputs) {
  const json messages = {{{"role", "user"}, {"content", "Name a color."}}};
  json body = chat_body(messages, 12);
  body["include_reasoning"] = false;
  json r = tests::post_json(*shared_, "/v1/chat/completions", body);
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content")) << r.dump();
  Streamed st = stream_chat(*shared_, body);
  EXPECT_FALSE(st.any_reasoning_field);
  // Structured outputs constrain the answer from its first token: it is all content.
  body = chat_body(messages, 24);
  body["response_format"] = {{"type", "json_object"}};
  r = tests::post_json(*shared_, "/v1/chat/completions", body);
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string()) << r.dump();
  EXPECT_FALSE(r["choices"][0]["message"]["content"].get<std::string>().empty()) << r.dump();
  body["include_reasoning"] = "no";
  r = tests::post_json(*shared_, "/v1/chat/completions", body, 400);
  EXPECT_EQ(r["error"]["param"], "include_reasoning");
}

class Qwen3ReasoningHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shared_.start({"--max-model-len", "1024", "--reasoning-parser", "qwen3"}); }
  static void TearDownTestSuite() { shared_.stop(); }
  void SetUp() override { TROUPE_REQUIRE_SERVER(shared_); }
  static tests::SharedModelServer shared_;
};
tests::SharedModelServer Qwen3ReasoningHttp::shared_;

TEST_F(Qwen3ReasoningHttp, EnableThinkingFalseAnswersInContent) {
  const json messages = {{{"role", "user"}, {"content", "What is the capital of France?"}}};
  const json off = {{"enable_thinking", false}};
  const std::string raw = raw_answer(*shared_, messages, 24, off);
  ASSERT_EQ(raw.find("</think>"), std::string::npos) << raw;
  json body = chat_body(messages, 24);
  body["chat_template_kwargs"] = off;
  json r = tests::post_json(*shared_, "/v1/chat/completions", body);
  EXPECT_EQ(r["choices"][0]["message"]["content"], raw) << r.dump();
  EXPECT_EQ(r["choices"][0]["message"]["reasoning_content"], nullptr) << r.dump();
  Streamed st = stream_chat(*shared_, body);
  EXPECT_EQ(st.content, raw);
  EXPECT_FALSE(st.any_reasoning_field);
  // Thinking on (the default): the same kind of answer without </think> is reasoning.
  const std::string on = raw_answer(*shared_, messages, 24);
  r = tests::post_json(*shared_, "/v1/chat/completions", chat_body(messages, 24));
  EXPECT_EQ(r["choices"][0]["message"]["reasoning_content"], on) << r.dump();
  EXPECT_EQ(r["choices"][0]["message"]["content"], nullptr) << r.dump();
}

}  // namespace
}  // namespace troupe
