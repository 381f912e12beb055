// Black-box tests of `troupe serve`: a real server process on 127.0.0.1
// with tests/data/stories260K.gguf, talked to over HTTP.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "tests/apps/serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

constexpr const char* kKey = "test-key-123";
constexpr const char* kModel = "stories";

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess({"--served-model-name", kModel, "--api-key", kKey, "--max-model-len", "256",
                                "--max-num-seqs", "64", "--disable-log-stats", "--chat-template", "chatml"});
    healthy_ = server_->wait_healthy();
    if (!healthy_) std::fprintf(stderr, "server log:\n%s\n", server_->log().c_str());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(healthy_) << "troupe serve did not become healthy"; }

  static http::Response call(const std::string& method, const std::string& path, const std::string& body = "",
                             bool with_key = true, const http::OnData& on_data = {}) {
    http::Headers h;
    if (with_key) h.emplace_back("Authorization", std::string("Bearer ") + kKey);
    auto r = http::request("127.0.0.1", server_->port(), method, path, body, h, on_data, std::chrono::seconds(120));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : http::Response{};
  }
  static json post_json(const std::string& path, const json& body, int expect_status = 200) {
    auto r = call("POST", path, body.dump());
    EXPECT_EQ(r.status, expect_status) << r.body;
    json j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }
  static void expect_healthy() {
    auto r = call("GET", "/health", "", false);
    EXPECT_EQ(r.status, 200);
  }
  // Streams a request; returns the "data:" payloads in order.
  static std::vector<std::string> stream(const std::string& path, const json& body, int* status = nullptr) {
    std::vector<std::string> events;
    http::SseParser sse;
    auto r = call("POST", path, body.dump(), true, [&](std::string_view piece) {
      sse.feed(piece, [&](std::string_view d) { events.emplace_back(d); });
      return true;
    });
    if (status) *status = r.status;
    return events;
  }
  static double metric(const std::string& name) {
    auto r = call("GET", "/metrics", "", false);
    std::istringstream in(r.body);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(name, 0) == 0 && (line.size() > name.size() && (line[name.size()] == '{' || line[name.size()] == ' ')))
        return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return -1;
  }

  static ServeProcess* server_;
  static bool healthy_;
};
ServeProcess* ServeTest::server_ = nullptr;
bool ServeTest::healthy_ = false;

TEST_F(ServeTest, HealthMetricsVersionModels) {
  expect_healthy();
  auto m = call("GET", "/metrics", "", false);
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("troupe:kv_cache_usage_perc"), std::string::npos);
  auto v = call("GET", "/version", "", false);
  EXPECT_EQ(v.status, 200);
  EXPECT_TRUE(json::parse(v.body).contains("version"));
  auto models = call("GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  json j = json::parse(models.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], kModel);
  EXPECT_EQ(j["data"][0]["max_model_len"], 256);
  EXPECT_EQ(call("GET", "/nope").status, 404);
  EXPECT_EQ(call("GET", "/v1/completions").status, 405);
}

TEST_F(ServeTest, CompletionShapeAndUsage) {
  json j = post_json("/v1/completions", {{"model", kModel}, {"prompt", "Once upon a time"}, {"max_tokens", 8},
                                         {"temperature", 0}});
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], kModel);
  EXPECT_TRUE(j["created"].is_number_integer());
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_TRUE(j["choices"][0]["text"].is_string());
  EXPECT_TRUE(j["choices"][0]["finish_reason"] == "length" || j["choices"][0]["finish_reason"] == "stop");
  EXPECT_TRUE(j["choices"][0].contains("logprobs"));
  const auto& u = j["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(u["completion_tokens"].get<int>(), 8);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
}

TEST_F(ServeTest, GreedyMatchesTroupeGenerate) {
  const std::string prompt = "Once upon a time, there was a little";
  std::string cmd = std::string(TROUPE_EXE) + " generate " + TROUPE_TEST_DATA_DIR +
                    "/stories260K.gguf --threads 1 -n 24 --json -p '" + prompt + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  json gen = json::parse(out);
  json j = post_json("/v1/completions", {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}});
  EXPECT_EQ(j["choices"][0]["text"], gen["text"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], gen["prompt_token_ids"].size());
  EXPECT_EQ(j["usage"]["completion_tokens"], gen["token_ids"].size());
}

TEST_F(ServeTest, StreamingFormatAndUsageChunk) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  int status = 0;
  auto events = stream("/v1/completions", body, &status);
  ASSERT_EQ(status, 200);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string id;
  bool saw_finish = false;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    if (id.empty()) id = c["id"];
    EXPECT_EQ(c["id"], id);
    ASSERT_EQ(c["choices"].size(), 1u);
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) saw_finish = true;
  }
  EXPECT_TRUE(saw_finish);
  json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_GT(usage["usage"]["completion_tokens"].get<int>(), 0);
  body.erase("stream");
  body.erase("stream_options");
  json whole = post_json("/v1/completions", body);
  EXPECT_EQ(text, whole["choices"][0]["text"]);
}

TEST_F(ServeTest, ChatCompletionWholeAndStreamed) {
  json body = {{"model", kModel}, {"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
               {"max_tokens", 8}, {"temperature", 0}};
  auto r = call("POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  body["stream"] = true;
  int status = 0;
  auto events = stream("/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(text, j["choices"][0]["message"]["content"]);
}

TEST_F(ServeTest, NChoicesEchoAndTokenPrompts) {
  json j = post_json("/v1/completions",
                     {{"prompt", "Once"}, {"max_tokens", 4}, {"n", 3}, {"seed", 7}, {"temperature", 0.8}});
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  j = post_json("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 3}, {"echo", true}, {"temperature", 0}});
  EXPECT_EQ(j["choices"][0]["text"].get<std::string>().rfind("Once upon", 0), 0u);
  json tok = post_json("/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_GT(tok["count"].get<int>(), 0);
  j = post_json("/v1/completions", {{"prompt", tok["tokens"]}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(j["usage"]["prompt_tokens"], tok["count"]);
  j = post_json("/v1/completions", {{"prompt", {"Once", "There"}}, {"max_tokens", 2}});
  EXPECT_EQ(j["choices"].size(), 2u);
  json logp = post_json("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"logprobs", 2}});
  EXPECT_TRUE(logp["choices"][0]["logprobs"].is_object());
}

// logit_bias, allowed_token_ids and min_tokens change what the model generates; echo's
// logprob offsets count the echoed prompt.
TEST_F(ServeTest, LogitBiasAllowedTokenIdsAndMinTokens) {
  json ids = post_json("/tokenize", {{"prompt", "dog cat"}, {"add_special_tokens", false}});
  ASSERT_GE(ids["tokens"].size(), 2u);
  const int a = ids["tokens"][0], b = ids["tokens"].back();
  auto tokens_of = [](const json& j) {
    std::vector<std::string> out;
    for (const auto& t : j["choices"][0]["logprobs"]["tokens"]) out.push_back(t);
    return out;
  };
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 0}};
  // Only token a allowed: every token is a.
  json only_a = base;
  only_a["allowed_token_ids"] = {a};
  const auto as = tokens_of(post_json("/v1/completions", only_a));
  ASSERT_EQ(as.size(), 6u);
  for (const auto& t : as) EXPECT_EQ(t, as[0]);
  json only_b = base;
  only_b["allowed_token_ids"] = {b};
  const std::string text_b = tokens_of(post_json("/v1/completions", only_b))[0];
  // A bias of +100 makes a the greedy choice every time; of the two allowed, the less lowered wins.
  json biased = base;
  biased["logit_bias"] = {{std::to_string(a), 100}};
  EXPECT_EQ(tokens_of(post_json("/v1/completions", biased)), as);
  json against_a = base;
  against_a["allowed_token_ids"] = {a, b};
  against_a["logit_bias"] = {{std::to_string(a), -100}, {std::to_string(b), -50}};
  for (const auto& t : tokens_of(post_json("/v1/completions", against_a))) EXPECT_EQ(t, text_b);
  // Random sampling among {a, b} only.
  json two = base;
  two["allowed_token_ids"] = {a, b};
  two["temperature"] = 1.0;
  two["seed"] = 3;
  two["max_tokens"] = 12;
  for (const auto& t : tokens_of(post_json("/v1/completions", two))) EXPECT_TRUE(t == as[0] || t == text_b) << t;
  // min_tokens: a stop string that would end the request at once is ignored until then.
  const std::string greedy_text = post_json("/v1/completions", base)["choices"][0]["text"];
  ASSERT_GE(greedy_text.size(), 3u);
  json stopping = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0},
                   {"stop", {greedy_text.substr(0, 3)}}};
  json early = post_json("/v1/completions", stopping);
  EXPECT_EQ(early["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(early["usage"]["completion_tokens"].get<int>(), 10);
  stopping["min_tokens"] = 10;
  json late = post_json("/v1/completions", stopping);
  EXPECT_GE(late["usage"]["completion_tokens"].get<int>(), 10) << late.dump();
  EXPECT_EQ(post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"min_tokens", 3}}, 400)["error"]["param"],
            "min_tokens");
  EXPECT_EQ(post_json("/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"100000", 1}}}}, 400)["error"]["param"],
            "logit_bias");
  // Echo: the generated tokens' offsets start after the prompt, whole and streamed.
  json echo = post_json("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 3}, {"temperature", 0},
                                            {"echo", true}, {"logprobs", 1}});
  EXPECT_EQ(echo["choices"][0]["logprobs"]["text_offset"][0], 9);
  auto events = stream("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 3}, {"temperature", 0},
                                           {"echo", true}, {"logprobs", 1}, {"stream", true}});
  ASSERT_FALSE(events.empty());
  json chunk = json::parse(events[0]);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["text_offset"][0], 9) << events[0];
}

TEST_F(ServeTest, ContinueFinalMessageIncludeStopStrAndRefusals) {
  // The prompt ends inside the assistant's message (chatml here), for /tokenize and chat alike.
  const json messages = {{{"role", "user"}, {"content", "Tell me a story"}},
                         {{"role", "assistant"}, {"content", "Once upon a time"}}};
  json tok = post_json("/tokenize", {{"messages", messages}, {"add_generation_prompt", false},
                                     {"continue_final_message", true}});
  std::string prompt = post_json("/detokenize", {{"tokens", tok["tokens"]}})["prompt"];
  const std::string tail = "<|im_start|>assistant\nOnce upon a time";
  ASSERT_GE(prompt.size(), tail.size());
  EXPECT_EQ(prompt.substr(prompt.size() - tail.size()), tail);
  json cont = post_json("/v1/chat/completions", {{"messages", messages}, {"add_generation_prompt", false},
                                                 {"continue_final_message", true}, {"max_tokens", 4},
                                                 {"temperature", 0}});
  EXPECT_EQ(cont["usage"]["prompt_tokens"], tok["count"]);
  EXPECT_EQ(post_json("/v1/chat/completions", {{"messages", messages}, {"continue_final_message", true}}, 400)
                ["error"]["param"],
            "continue_final_message");
  // include_stop_str_in_output keeps the stop string that ended the text.
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
  const std::string greedy = post_json("/v1/completions", base)["choices"][0]["text"];
  ASSERT_GE(greedy.size(), 8u);
  const std::string stop = greedy.substr(4, 3);
  json with_stop = base;
  with_stop["stop"] = {stop};
  const std::string cut = post_json("/v1/completions", with_stop)["choices"][0]["text"];
  with_stop["include_stop_str_in_output"] = true;
  const std::string kept = post_json("/v1/completions", with_stop)["choices"][0]["text"];
  EXPECT_EQ(kept, cut + stop);
  // Tools with tool_choice "auto" (the default with tools) need a tool parser: a 400 saying so.
  json rf = post_json("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                               {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}},
                      400);
  EXPECT_EQ(rf["error"]["param"], "tool_choice");
  EXPECT_NE(rf["error"]["message"].get<std::string>().find("--tool-call-parser"), std::string::npos);
}

TEST_F(ServeTest, TokenizeDetokenizeRoundTrip) {
  json t = post_json("/tokenize", {{"model", kModel}, {"prompt", "Hello world"}, {"add_special_tokens", false}});
  EXPECT_EQ(t["max_model_len"], 256);
  json d = post_json("/detokenize", {{"tokens", t["tokens"]}});
  // SPM vocabularies decode the word-start marker of the first token as a space.
  std::string text = d["prompt"];
  EXPECT_TRUE(text == "Hello world" || text == " Hello world") << text;
  json bad = post_json("/detokenize", {{"tokens", {999999}}}, 400);
  EXPECT_EQ(bad["error"]["param"], "tokens");
}

TEST_F(ServeTest, ErrorsHaveTheOpenAIEnvelope) {
  // Unknown model: 404 with vLLM's wording.
  json j = post_json("/v1/completions", {{"model", "gpt-9"}, {"prompt", "x"}}, 404);
  EXPECT_EQ(j["error"]["message"], "The model `gpt-9` does not exist.");
  EXPECT_EQ(j["error"]["type"], "NotFoundError");
  EXPECT_EQ(j["error"]["code"], 404);
  // Invalid parameter: 400 naming it.
  j = post_json("/v1/completions", {{"prompt", "x"}, {"temperature", -1}}, 400);
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("temperature"), std::string::npos);
  // Too long for the context (256).
  j = post_json("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 1000}}, 400);
  EXPECT_NE(j["error"]["message"].get<std::string>().find("This model's maximum context length is 256 tokens. However, you requested"),
            std::string::npos)
      << j.dump();
  EXPECT_NE(j["error"]["message"].get<std::string>().find("in the messages, 1000 in the completion). Please reduce"),
            std::string::npos);
  // API key: missing or wrong -> 401; health and metrics stay open.
  EXPECT_EQ(call("GET", "/v1/models", "", false).status, 401);
  auto wrong = http::request("127.0.0.1", server_->port(), "GET", "/v1/models", "", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(json::parse(wrong->body)["error"]["code"], 401);
  EXPECT_EQ(call("GET", "/metrics", "", false).status, 200);
  // Oversized body: 413.
  std::string big = json{{"prompt", std::string(2u << 20, 'a')}}.dump();
  auto r = call("POST", "/v1/completions", big);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], 413);
  expect_healthy();
}

TEST_F(ServeTest, BadInputCorpusGets4xxAndServerStaysUp) {
  json stops = json::array();
  for (int i = 0; i < 10000; ++i) stops.push_back(fmt::format("s{}", i));
  const std::string nested = "{\"prompt\":" + std::string(50000, '[') + std::string(50000, ']') + "}";
  const std::vector<std::pair<std::string, std::string>> corpus = {
      {"/v1/completions", "{not json"},
      {"/v1/completions", ""},
      {"/v1/completions", "[]"},
      {"/v1/completions", R"({"prompt": 5})"},
      {"/v1/completions", R"({"prompt": "x", "temperature": NaN})"},
      {"/v1/completions", R"({"prompt": "x", "temperature": -0.5})"},
      {"/v1/completions", R"({"prompt": "x", "temperature": "warm"})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -3})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 99999999999})"},
      {"/v1/completions", R"({"prompt": "x", "n": 1000000})"},
      {"/v1/completions", json{{"prompt", "x"}, {"stop", stops}}.dump()},
      {"/v1/completions", "{\"prompt\": \"\xff\xfe\xfd\"}"},
      {"/v1/completions", R"({"prompt": [1, 2, 99999999]})"},
      {"/v1/completions", R"({"prompt": [-1]})"},
      {"/v1/completions", R"({"prompt": ""})"},
      {"/v1/completions", R"({"prompt": []})"},
      {"/v1/completions", nested},
      {"/v1/completions", R"({"prompt": "x", "top_p": 0})"},
      {"/v1/completions", R"({"prompt": "x", "stop_token_ids": [123456789]})"},
      {"/v1/chat/completions", R"({"messages": []})"},
      {"/v1/chat/completions", R"({"messages": [{"role": 1}]})"},
      {"/v1/chat/completions", R"({"messages": "hi"})"},
      {"/tokenize", R"({"prompt": 3})"},
      {"/detokenize", R"({"tokens": "abc"})"},
  };
  for (const auto& [path, body] : corpus) {
    auto r = call("POST", path, body);
    EXPECT_GE(r.status, 400) << path << " " << body.substr(0, 80);
    EXPECT_LT(r.status, 500) << path << " " << body.substr(0, 80) << " -> " << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_TRUE(j["error"].contains("message"));
  }
  expect_healthy();
}

TEST_F(ServeTest, SlowClientDribblingItsBodyDoesNotBlockOthers) {
  std::string body = R"({"prompt": "x", "temperature": -2})";
  http::Connection c;
  ASSERT_TRUE(c.connect("127.0.0.1", server_->port(), std::chrono::seconds(5)).ok());
  std::string head = fmt::format(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\n\r\n",
      kKey, body.size());
  ASSERT_TRUE(c.write(head, std::chrono::seconds(5)).ok());
  for (size_t i = 0; i < body.size(); i += 4) {
    ASSERT_TRUE(c.write(std::string_view(body).substr(i, 4), std::chrono::seconds(5)).ok());
    if (i == 8) expect_healthy();  // others are served meanwhile
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  auto r = c.read_response(std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "temperature");
}

TEST_F(ServeTest, ClientDisconnectAbortsAndFreesKvBlocks) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}};
  for (int round = 0; round < 3; ++round) {
    http::Connection c;
    ASSERT_TRUE(c.connect("127.0.0.1", server_->port(), std::chrono::seconds(5)).ok());
    ASSERT_TRUE(c.write(http::build_request("POST", "127.0.0.1", server_->port(), "/v1/completions", body.dump(),
                                            {{"Authorization", std::string("Bearer ") + kKey}}),
                        std::chrono::seconds(5))
                    .ok());
    int events = 0;
    http::SseParser sse;
    auto r = c.read_response(std::chrono::seconds(60), [&](std::string_view piece) {
      sse.feed(piece, [&](std::string_view) { ++events; });
      return events < 3;  // hang up mid-stream
    });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200);
    c.close();
  }
  // The aborted requests' blocks come back: usage returns to zero.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  double usage = -1, running = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    usage = metric("troupe:kv_cache_usage_perc");
    running = metric("troupe:num_requests_running");
    if (usage == 0 && running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(usage, 0);
  EXPECT_EQ(running, 0);
  // ... because the server noticed the hang-ups and aborted (not because they finished).
  const std::string log = server_->log();
  size_t aborted = 0;
  for (size_t pos = 0; (pos = log.find("client disconnected", pos)) != std::string::npos; ++pos) ++aborted;
  EXPECT_GE(aborted, 3u);
  expect_healthy();
}

TEST_F(ServeTest, LoadOfThreeHundredRequestsAtConcurrency32) {
  constexpr int kRequests = 300, kClients = 32;
  std::atomic<int> next{0}, ok{0};
  std::vector<std::string> failures;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < kRequests;) {
        json body = {{"prompt", fmt::format("Once upon a time {}", i)}, {"max_tokens", 8}, {"ignore_eos", true}};
        bool streamed = i % 2 == 0;
        if (streamed) body["stream"] = true;
        std::string got;
        auto r = http::request("127.0.0.1", server_->port(), "POST", "/v1/completions", body.dump(),
                               {{"Authorization", std::string("Bearer ") + kKey}}, {}, std::chrono::seconds(300));
        bool good = r.ok() && r->status == 200 &&
                    (streamed ? r->body.find("data: [DONE]") != std::string::npos
                              : json::parse(r->body)["usage"]["completion_tokens"] == 8);
        if (good) {
          ++ok;
        } else {
          std::lock_guard lock(mu);
          failures.push_back(r.ok() ? std::to_string(r->status) + " " + r->body.substr(0, 200) : r.status().to_string());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kRequests) << (failures.empty() ? "" : failures[0]);
  expect_healthy();
}

TEST(ServeQueue, FullWaitingQueueAnswers503) {
  ServeProcess s({"--max-num-seqs", "1", "--max-num-queued-requests", "1", "--disable-log-stats"});
  ASSERT_TRUE(s.wait_healthy()) << s.log();
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"ignore_eos", true}};
  std::atomic<int> n503{0}, n200{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      auto r = http::request("127.0.0.1", s.port(), "POST", "/v1/completions", body.dump(), {}, {},
                             std::chrono::seconds(300));
      if (r.ok() && r->status == 503) {
        ++n503;
        EXPECT_EQ(json::parse(r->body)["error"]["code"], 503);
      } else if (r.ok() && r->status == 200) {
        ++n200;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GE(n503.load(), 1);
  EXPECT_GE(n200.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(s.stop(), 0) << "SIGTERM must shut down cleanly\n" << s.log();
}

TEST(ServeStartup, PortInUseIsAClearError) {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const int port = a.local_endpoint().port();
  std::string cmd = std::string(TROUPE_EXE) + " serve " + TROUPE_TEST_DATA_DIR + "/stories260K.gguf --host 127.0.0.1 --port " +
                    std::to_string(port) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int rc = pclose(p);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find(fmt::format("cannot listen on 127.0.0.1:{}", port)), std::string::npos) << out;
}

}  // namespace
}  // namespace troupe::tests
