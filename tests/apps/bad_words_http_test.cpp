// vLLM's bad_words through a real `troupe serve` on loopback with the default model
// (SmolLM2-135M-Instruct): a word that greedy decoding writes is gone once it is a bad
// word, whole and streamed, on completions (a one-token word) and chat (a three-token
// word, banned by its last token after the other two); what is not a list of strings,
// or a word of only whitespace, is a 400 naming bad_words.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

// The text of choice 0: whole, or the streamed pieces put together.
std::string text_of(const tests::ServeProcess& s, const std::string& path, json body, bool streamed) {
  const bool chat = path.find("chat") != std::string::npos;
  if (!streamed) {
    json r = tests::post_json(s, path, body);
    if (!r.is_object() || !r.contains("choices")) return "<no choices>";
    return chat ? r["choices"][0]["message"]["content"].get<std::string>() : r["choices"][0]["text"].get<std::string>();
  }
  body["stream"] = true;
  std::string text;
  http::SseParser sse;
  auto r = http::request("127.0.0.1", s.port(), "POST", path, body.dump(), {{"Content-Type", "application/json"}},
                         [&](std::string_view piece) {
                           sse.feed(piece, [&](std::string_view d) {
                             if (d == "[DONE]") return;
                             json chunk = json::parse(d, nullptr, false);
                             if (!chunk.is_object() || !chunk.contains("choices") || chunk["choices"].empty()) return;
                             const json& c = chunk["choices"][0];
                             if (chat) {
                               if (c.contains("delta") && c["delta"].contains("content") &&
                                   c["delta"]["content"].is_string())
                                 text += c["delta"]["content"].get<std::string>();
                             } else {
                               text += c["text"].get<std::string>();
                             }
                           });
                           return true;
                         },
                         std::chrono::seconds(120));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (r.ok()) {
    EXPECT_EQ(r->status, 200) << r->body;
  }
  return text;
}

class BadWordsHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_.start({"--max-model-len", "512"}); }
  static void TearDownTestSuite() { server_.stop(); }
  void SetUp() override {
    TROUPE_REQUIRE_SERVER(server_);
  }
  static inline tests::SharedModelServer server_;
};

// A one-token word: "Paris" and " Paris" (one token each) never sampled. On this model
// greedy gives " Paris.\n\nThe answer is: 201" without bad_words and
// " the capital of the French Republic.\n\nThe French language" with them.
TEST_F(BadWordsHttp, CompletionsLoseAOneTokenWord) {
  const json base = {{"prompt", "The capital of France is"}, {"max_tokens", 12}, {"temperature", 0}};
  json banned = base;
  banned["bad_words"] = {"Paris"};
  for (bool streamed : {false, true}) {
    SCOPED_TRACE(streamed ? "streamed" : "whole");
    const std::string without = text_of(*server_, "/v1/completions", base, streamed);
    const std::string with = text_of(*server_, "/v1/completions", banned, streamed);
    EXPECT_NE(without.find("Paris"), std::string::npos) << "without bad_words: " << without;
    EXPECT_EQ(with.find("Paris"), std::string::npos) << "with bad_words [\"Paris\"]: " << with;
    EXPECT_FALSE(with.empty());
  }
}

// A multi-token word: "capital of France" is three tokens; its last one is banned only after
// the other two, so the answer still starts "The capital of" and goes another way: greedy
// gives "The capital of France is Paris." without bad_words and "The capital of the French
// Republic is Paris." with them.
TEST_F(BadWordsHttp, ChatLosesAMultiTokenWord) {
  const json base = {{"messages", {{{"role", "user"}, {"content", "What is the capital of France?"}}}},
                     {"max_tokens", 16},
                     {"temperature", 0}};
  json banned = base;
  banned["bad_words"] = {"capital of France"};
  for (bool streamed : {false, true}) {
    SCOPED_TRACE(streamed ? "streamed" : "whole");
    const std::string without = text_of(*server_, "/v1/chat/completions", base, streamed);
    const std::string with = text_of(*server_, "/v1/chat/completions", banned, streamed);
    EXPECT_NE(without.find("capital of France"), std::string::npos) << "without bad_words: " << without;
    EXPECT_EQ(with.find("capital of France"), std::string::npos) << "with bad_words: " << with;
    EXPECT_NE(with.find("capital of"), std::string::npos) << "with bad_words: " << with;
  }
}

TEST_F(BadWordsHttp, NotAListOfStringsIsA400NamingBadWords) {
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    json body = std::string(path).find("chat") != std::string::npos
                    ? json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}}
                    : json{{"prompt", "Hi"}, {"max_tokens", 2}};
    for (const json& bad : {json("Paris"), json::array({"Paris", 3}), json::array({json::array({"Paris"})}),
                            json::array({"  "})}) {
      body["bad_words"] = bad;
      json r = tests::post_json(*server_, path, body, 400);
      EXPECT_EQ(r["error"]["param"], "bad_words") << path << " " << bad.dump() << ": " << r.dump();
    }
  }
}

}  // namespace
}  // namespace troupe
