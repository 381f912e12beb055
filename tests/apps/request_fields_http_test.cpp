// vLLM's per-request fields of /v1/completions and /v1/chat/completions through a
// real `troupe serve` on loopback: cache_salt isolates prefix-cache blocks (read
// back from /metrics), streaming and not; the beam-search fields troupe lacks are
// a 400 naming them unless at vLLM's defaults; return_token_ids puts the prompt's
// and the output's ids on each choice; return_tokens_as_token_ids names logprob
// tokens "token_id:N"; truncate_prompt_tokens cuts the prompt to its end; a per-request
// chat_template and chat_template_kwargs are rendered.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "apps/bench/http_client.hpp"
#include "tests/apps/serve_process.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
namespace http = apps::http;

http::Response call(const tests::ServeProcess& s, const std::string& path, const json& body,
                    const http::OnData& on_data = {}) {
  auto r = http::request("127.0.0.1", s.port(), "POST", path, body.dump(), {{"Content-Type", "application/json"}},
                         on_data, std::chrono::seconds(120));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : http::Response{};
}

// A counter of /metrics (summed over its label sets), or -1 when absent.
double metric(const tests::ServeProcess& s, const std::string& name) {
  auto r = http::request("127.0.0.1", s.port(), "GET", "/metrics", "", {}, {}, std::chrono::seconds(30));
  if (!r.ok()) return -1;
  std::istringstream in(r->body);
  std::string line;
  double sum = -1;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) == 0 && line.size() > name.size() && (line[name.size()] == '{' || line[name.size()] == ' '))
      sum = (sum < 0 ? 0 : sum) + std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Prefix-cache hits (tokens) of one request: runs it, then waits until its
// prefix-cache query shows in /metrics.
double hits_of(const tests::ServeProcess& s, const std::function<void()>& send) {
  const double queries = metric(s, "troupe:prefix_cache_queries_total");
  const double hits = metric(s, "troupe:prefix_cache_hits_total");
  EXPECT_GE(queries, 0);
  EXPECT_GE(hits, 0);
  send();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (metric(s, "troupe:prefix_cache_queries_total") <= queries && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GT(metric(s, "troupe:prefix_cache_queries_total"), queries) << "the request's query never reached /metrics";
  // Both counters move in one stats record; a scrape may fall between the two increments.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return metric(s, "troupe:prefix_cache_hits_total") - hits;
}

// A prompt of well over two 16-token blocks, different per phase so that phases share nothing.
std::string long_prompt(const std::string& name) {
  return "Once upon a time there was a little girl named " + name +
         ". She loved to play in the park with her friends every day. One day she found a big red ball "
         "under a tree and she was very happy. She ran home to show her mom the ball.";
}

TEST(RequestFieldsHttp, CacheSaltIsolatesPrefixCacheBlocks) {
  tests::ServeProcess server({"--max-model-len", "512", "--chat-template", "chatml"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streaming" : "whole");
    const std::string prompt = long_prompt(stream ? "Lily" : "Sue");
    auto completion = [&](const char* salt) {
      return [&, salt] {
        json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"stream", stream}};
        if (salt) body["cache_salt"] = salt;
        std::string streamed;
        http::SseParser sse;
        auto r = call(server, "/v1/completions", body, [&](std::string_view piece) {
          sse.feed(piece, [&](std::string_view d) { streamed += std::string(d) + "\n"; });
          return true;
        });
        EXPECT_EQ(r.status, 200) << r.body;
        if (stream) {
          EXPECT_NE(streamed.find("[DONE]"), std::string::npos) << streamed;
        }
      };
    };
    EXPECT_EQ(hits_of(server, completion("tenant-a")), 0);  // a new prompt
    EXPECT_GE(hits_of(server, completion("tenant-a")), 32);  // the same salt shares its blocks
    EXPECT_EQ(hits_of(server, completion("tenant-b")), 0);  // another salt shares none
    EXPECT_EQ(hits_of(server, completion(nullptr)), 0);     // nor does no salt
    EXPECT_GE(hits_of(server, completion(nullptr)), 32);    // which shares with itself
  }
  // Chat: the same, through the chat template.
  auto chat = [&](const char* salt) {
    return [&, salt] {
      json body = {{"messages", {{{"role", "user"}, {"content", long_prompt("Tom")}}}},
                   {"max_tokens", 4},
                   {"temperature", 0},
                   {"cache_salt", salt}};
      auto r = call(server, "/v1/chat/completions", body);
      EXPECT_EQ(r.status, 200) << r.body;
    };
  };
  EXPECT_EQ(hits_of(server, chat("x")), 0);
  EXPECT_GE(hits_of(server, chat("x")), 32);
  EXPECT_EQ(hits_of(server, chat("y")), 0);
  // An empty or non-string salt is a 400 naming it.
  for (const json& salt : {json(""), json(7), json::array({"a"})}) {
    for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
      json body = {{"max_tokens", 1}, {"cache_salt", salt}};
      if (std::string(path) == "/v1/completions") body["prompt"] = "x";
      else body["messages"] = {{{"role", "user"}, {"content", "x"}}};
      auto r = call(server, path, body);
      EXPECT_EQ(r.status, 400) << path << " " << salt.dump() << " " << r.body;
      json err = json::parse(r.body, nullptr, false);
      EXPECT_EQ(err["error"]["param"], "cache_salt") << r.body;
    }
  }
}

TEST(RequestFieldsHttp, BeamSearchFieldsAreRefusedUnlessDefault) {
  tests::ServeProcess server({"--max-model-len", "256", "--chat-template", "chatml"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  const std::pair<const char*, json> refused[] = {
      {"use_beam_search", true}, {"length_penalty", 0.8}, {"logprob_token_ids", json::array({1, 2})}};
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    auto base = [&] {
      json body = {{"max_tokens", 2}, {"temperature", 0}};
      if (std::string(path) == "/v1/completions") body["prompt"] = "Once upon a time";
      else body["messages"] = {{{"role", "user"}, {"content", "Once upon a time"}}};
      return body;
    };
    for (const auto& [key, value] : refused) {
      json body = base();
      body[key] = value;
      auto r = call(server, path, body);
      EXPECT_EQ(r.status, 400) << path << " " << key << " " << r.body;
      json err = json::parse(r.body, nullptr, false);
      EXPECT_EQ(err["error"]["param"], key) << r.body;
      EXPECT_NE(r.body.find("not implemented"), std::string::npos) << r.body;
    }
    // vLLM's defaults are accepted.
    json body = base();
    body["use_beam_search"] = false;
    body["length_penalty"] = 1.0;
    auto r = call(server, path, body);
    EXPECT_EQ(r.status, 200) << path << " " << r.body;
  }
}

json post(const tests::ServeProcess& s, const std::string& path, const json& body) {
  auto r = call(s, path, body);
  EXPECT_EQ(r.status, 200) << path << " " << r.body;
  return json::parse(r.body, nullptr, false);
}

// The data events of a streamed request, parsed, without [DONE].
std::vector<json> stream_events(const tests::ServeProcess& s, const std::string& path, json body) {
  body["stream"] = true;
  std::vector<json> events;
  http::SseParser sse;
  auto r = call(s, path, body, [&](std::string_view piece) {
    sse.feed(piece, [&](std::string_view d) {
      if (d != "[DONE]") events.push_back(json::parse(d, nullptr, false));
    });
    return true;
  });
  EXPECT_EQ(r.status, 200);
  return events;
}

TEST(RequestFieldsHttp, ReturnTokenIdsGivesPromptAndOutputIds) {
  tests::ServeProcess server({"--max-model-len", "256", "--chat-template", "chatml"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  const std::string prompt = "Once upon a time";
  const json want_prompt = post(server, "/tokenize", {{"prompt", prompt}})["tokens"];
  ASSERT_FALSE(want_prompt.empty());
  const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true},
                     {"return_token_ids", true}};
  json r = post(server, "/v1/completions", body);
  const json& c = r["choices"][0];
  EXPECT_EQ(c["prompt_token_ids"], want_prompt) << r.dump();
  ASSERT_TRUE(c["token_ids"].is_array()) << r.dump();
  EXPECT_EQ(c["token_ids"].size(), 12u) << r.dump();
  EXPECT_EQ(c["token_ids"].size(), r["usage"]["completion_tokens"].get<size_t>());
  // The output ids are the text's.
  EXPECT_EQ(post(server, "/detokenize", {{"tokens", c["token_ids"]}})["prompt"], c["text"]) << r.dump();
  // Without it, neither key.
  json plain = post(server, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}});
  EXPECT_FALSE(plain["choices"][0].contains("token_ids")) << plain.dump();
  EXPECT_FALSE(plain["choices"][0].contains("prompt_token_ids")) << plain.dump();
  // Streamed: the prompt's ids on the first chunk only; the deltas' ids add up to the same output.
  std::vector<json> events = stream_events(server, "/v1/completions", body);
  ASSERT_FALSE(events.empty());
  json streamed = json::array();
  for (size_t i = 0; i < events.size(); ++i) {
    const json& ch = events[i]["choices"][0];
    if (i == 0) EXPECT_EQ(ch["prompt_token_ids"], want_prompt) << ch.dump();
    else EXPECT_FALSE(ch.contains("prompt_token_ids")) << i << ": " << ch.dump();
    ASSERT_TRUE(ch["token_ids"].is_array()) << ch.dump();
    for (const auto& id : ch["token_ids"]) streamed.push_back(id);
  }
  EXPECT_EQ(streamed, c["token_ids"]);
  // Chat (vLLM's shape): the prompt's ids, as the chat template rendered it, on the response
  // (a stream's first chunk); the output's on the choice.
  const json chat_body = {{"messages", {{{"role", "user"}, {"content", prompt}}}}, {"max_tokens", 6},
                          {"temperature", 0}, {"ignore_eos", true}, {"return_token_ids", true}};
  json chat = post(server, "/v1/chat/completions", chat_body);
  const json& cc = chat["choices"][0];
  ASSERT_TRUE(chat["prompt_token_ids"].is_array()) << chat.dump();
  EXPECT_EQ(chat["prompt_token_ids"].size(), chat["usage"]["prompt_tokens"].get<size_t>());
  EXPECT_FALSE(cc.contains("prompt_token_ids")) << chat.dump();
  EXPECT_EQ(cc["token_ids"].size(), 6u) << chat.dump();
  EXPECT_EQ(post(server, "/detokenize", {{"tokens", cc["token_ids"]}})["prompt"], cc["message"]["content"]);
  events = stream_events(server, "/v1/chat/completions", chat_body);
  ASSERT_FALSE(events.empty());
  json chat_streamed = json::array();
  for (size_t i = 0; i < events.size(); ++i) {
    const json& ch = events[i]["choices"][0];
    if (i == 0) EXPECT_EQ(events[i]["prompt_token_ids"], chat["prompt_token_ids"]) << events[i].dump();
    else EXPECT_FALSE(events[i].contains("prompt_token_ids")) << i << ": " << events[i].dump();
    for (const auto& id : ch["token_ids"]) chat_streamed.push_back(id);
  }
  EXPECT_EQ(chat_streamed, cc["token_ids"]);
  EXPECT_EQ(call(server, "/v1/completions", {{"prompt", prompt}, {"return_token_ids", "yes"}}).status, 400);
}

// truncate_prompt_tokens on generation (vLLM's meaning): the prompt's last N tokens, with the
// BOS the tokenizer adds to a text prompt kept; -1 is max_model_len; bad values are a 400.
TEST(RequestFieldsHttp, TruncatePromptTokensKeepsThePromptsEnd) {
  tests::ServeProcess server({"--max-model-len", "256", "--chat-template", "chatml"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  const std::string prompt = long_prompt("Ann");
  const auto full = post(server, "/tokenize", {{"prompt", prompt}})["tokens"].get<std::vector<int64_t>>();
  const auto bare = post(server, "/tokenize", {{"prompt", prompt}, {"add_special_tokens", false}})["tokens"]
                        .get<std::vector<int64_t>>();
  ASSERT_GT(bare.size(), 30u);
  ASSERT_GE(full.size(), bare.size());
  const size_t specials = full.size() - bare.size();  // the BOS the tokenizer adds, if any
  const size_t n = 20;
  std::vector<int64_t> want(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(specials));
  want.insert(want.end(), bare.end() - static_cast<std::ptrdiff_t>(n - specials), bare.end());
  const json body = {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}, {"return_token_ids", true},
                     {"truncate_prompt_tokens", n}};
  json r = post(server, "/v1/completions", body);
  EXPECT_EQ(r["usage"]["prompt_tokens"], n) << r.dump();
  EXPECT_EQ(r["choices"][0]["prompt_token_ids"], json(want)) << r.dump();
  // Streamed: the first chunk carries the cut prompt.
  std::vector<json> events = stream_events(server, "/v1/completions", body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0]["choices"][0]["prompt_token_ids"], json(want)) << events[0].dump();
  // Token ids: the last N.
  json ids = post(server, "/v1/completions",
                  {{"prompt", full}, {"max_tokens", 2}, {"return_token_ids", true}, {"truncate_prompt_tokens", n}});
  EXPECT_EQ(ids["usage"]["prompt_tokens"], n) << ids.dump();
  EXPECT_EQ(ids["choices"][0]["prompt_token_ids"], json(std::vector<int64_t>(full.end() - n, full.end())));
  // -1: max_model_len, so this prompt stays whole.
  json whole = post(server, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}, {"truncate_prompt_tokens", -1}});
  EXPECT_EQ(whole["usage"]["prompt_tokens"], full.size()) << whole.dump();
  // Chat: the end of the rendered conversation.
  const json messages = {{{"role", "user"}, {"content", prompt}}};
  json chat_whole = post(server, "/v1/chat/completions",
                         {{"messages", messages}, {"max_tokens", 2}, {"return_token_ids", true}});
  const auto chat_ids = chat_whole["prompt_token_ids"].get<std::vector<int64_t>>();
  ASSERT_GT(chat_ids.size(), n);
  json chat = post(server, "/v1/chat/completions",
                   {{"messages", messages}, {"max_tokens", 2}, {"return_token_ids", true}, {"truncate_prompt_tokens", n}});
  EXPECT_EQ(chat["usage"]["prompt_tokens"], n) << chat.dump();
  // ChatML writes no BOS, so the tokenizer adds it to the rendered text, and it stays.
  std::vector<int64_t> chat_want(chat_ids.begin(), chat_ids.begin() + static_cast<std::ptrdiff_t>(specials));
  chat_want.insert(chat_want.end(), chat_ids.end() - static_cast<std::ptrdiff_t>(n - specials), chat_ids.end());
  EXPECT_EQ(chat["prompt_token_ids"], json(chat_want)) << chat.dump();
  // 0, -2, a string, beyond max_model_len: a 400 naming the field.
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    for (const json& bad : {json(0), json(-2), json("8"), json(257)}) {
      json b = {{"max_tokens", 2}, {"truncate_prompt_tokens", bad}};
      if (std::string(path) == "/v1/completions") b["prompt"] = prompt;
      else b["messages"] = messages;
      auto e = call(server, path, b);
      EXPECT_EQ(e.status, 400) << path << " " << bad << ": " << e.body;
      EXPECT_EQ(json::parse(e.body, nullptr, false)["error"]["param"], "truncate_prompt_tokens") << e.body;
    }
  }
}

// A per-request chat template is compiled and rendered (vLLM's chat_template), with
// chat_template_kwargs in its context; /tokenize shows the prompt it makes. A bad
// template is a 400 naming chat_template, and the server keeps serving.
TEST(RequestFieldsHttp, PerRequestChatTemplateAndKwargs) {
  tests::ServeProcess server({"--max-model-len", "256", "--chat-template", "chatml"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  const json messages = {{{"role", "user"}, {"content", "Once upon a time"}}};
  const std::string tmpl = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}{% endfor %}{{ suffix | default('') }}";
  auto tokens_of = [&](const json& body) {
    auto r = call(server, "/tokenize", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false)["tokens"];
  };
  const json expected = tokens_of({{"prompt", "[USER] Once upon a time there"}});
  EXPECT_EQ(tokens_of({{"messages", messages}, {"chat_template", tmpl}, {"chat_template_kwargs", {{"suffix", " there"}}}}),
            expected);
  EXPECT_NE(tokens_of({{"messages", messages}}), expected);  // the server's template (chatml) otherwise
  post(server, "/v1/chat/completions",
       {{"messages", messages}, {"max_tokens", 2}, {"chat_template", tmpl}, {"chat_template_kwargs", {{"suffix", "!"}}}});

  const std::pair<const char*, json> bad[] = {
      {"chat_template", "{% for m in messages %}{{ m.content }}"},   // not closed
      {"chat_template", "{{ raise_exception('no user turns here') }}"},
      {"chat_template", 7},
      {"chat_template_kwargs", "x"},
      {"chat_template_kwargs", {{"messages", json::array()}}}};
  for (const auto& [key, value] : bad) {
    json body = {{"messages", messages}, {"max_tokens", 2}};
    body[key] = value;
    auto r = call(server, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << key << " " << r.body;
    EXPECT_EQ(json::parse(r.body, nullptr, false)["error"]["param"], key) << r.body;
  }
  auto r = call(server, "/v1/chat/completions",
                {{"messages", messages}, {"chat_template", "{{ raise_exception('no user turns here') }}"}});
  EXPECT_NE(r.body.find("no user turns here"), std::string::npos) << r.body;
  r = call(server, "/v1/chat/completions", {{"messages", messages}, {"chat_template", "{% for m in messages %}"}});
  EXPECT_NE(r.body.find("syntax error"), std::string::npos) << r.body;
  post(server, "/v1/chat/completions",
       {{"messages", messages}, {"max_tokens", 2}, {"chat_template", ""}, {"chat_template_kwargs", json::object()}});
}

// --chat-template takes a Jinja file or string (vLLM's flag), checked at start-up: a
// template that does not compile, or a path that is not a file, stops the server with
// the reason.
TEST(RequestFieldsHttp, ChatTemplateFlagFileStringAndStartupErrors) {
  const std::string path = "/tmp/troupe_chat_template_" + std::to_string(::getpid()) + ".jinja";
  {
    std::ofstream f(path);
    f << "{%- for m in messages %}<{{ m.role }}>{{ m.content | trim }}\n{% endfor %}\n";
  }
  {
    tests::ServeProcess server({"--max-model-len", "256", "--chat-template", path});
    ASSERT_TRUE(server.wait_healthy()) << server.log();
    auto a = call(server, "/tokenize", {{"messages", {{{"role", "user"}, {"content", " hi "}}}}});
    auto b = call(server, "/tokenize", {{"prompt", "<user>hi\n"}});
    EXPECT_EQ(json::parse(a.body)["tokens"], json::parse(b.body)["tokens"]) << a.body << b.body;
  }
  std::remove(path.c_str());
  const std::pair<std::string, std::string> bad[] = {{"{% for m in messages %}", "syntax error"},
                                                     {path, "neither a readable file nor a Jinja template"}};
  for (const auto& [value, why] : bad) {
    tests::ServeProcess server({"--max-model-len", "256", "--chat-template", value});
    EXPECT_FALSE(server.wait_healthy(std::chrono::seconds(60))) << value;
    EXPECT_NE(server.stop(), 0) << value;
    EXPECT_NE(server.log().find(why), std::string::npos) << server.log();
  }
}

TEST(RequestFieldsHttp, ReturnTokensAsTokenIdsNamesLogprobTokensById) {
  tests::ServeProcess server({"--max-model-len", "256", "--chat-template", "chatml"});
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  json r = post(server, "/v1/completions",
                {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true},
                 {"logprobs", 2}, {"return_tokens_as_token_ids", true}, {"return_token_ids", true}});
  const json& c = r["choices"][0];
  const json& tokens = c["logprobs"]["tokens"];
  ASSERT_EQ(tokens.size(), 6u) << r.dump();
  ASSERT_EQ(c["token_ids"].size(), 6u) << r.dump();
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i], "token_id:" + std::to_string(c["token_ids"][i].get<int>())) << r.dump();
    ASSERT_EQ(c["logprobs"]["top_logprobs"][i].size(), 2u) << r.dump();
    for (const auto& [key, v] : c["logprobs"]["top_logprobs"][i].items())
      EXPECT_EQ(key.rfind("token_id:", 0), 0u) << key;
  }
  // The greedy token is the best alternative, under its id.
  EXPECT_TRUE(c["logprobs"]["top_logprobs"][0].contains(tokens[0].get<std::string>())) << r.dump();
  // Without it, the tokens are text.
  json plain = post(server, "/v1/completions",
                    {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true},
                     {"logprobs", 2}});
  EXPECT_EQ(plain["choices"][0]["text"], c["text"]);
  for (const auto& t : plain["choices"][0]["logprobs"]["tokens"])
    EXPECT_EQ(t.get<std::string>().rfind("token_id:", 0), std::string::npos) << plain.dump();
  // Chat, streamed: each content entry and its alternatives.
  std::vector<json> events = stream_events(
      server, "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}, {"temperature", 0},
       {"ignore_eos", true}, {"logprobs", true}, {"top_logprobs", 1}, {"return_tokens_as_token_ids", true},
       {"return_token_ids", true}});
  int entries = 0;
  for (const auto& e : events) {
    const json& ch = e["choices"][0];
    if (!ch["logprobs"].is_object()) continue;
    const json& content = ch["logprobs"]["content"];
    ASSERT_EQ(content.size(), ch["token_ids"].size()) << ch.dump();
    for (size_t i = 0; i < content.size(); ++i, ++entries) {
      EXPECT_EQ(content[i]["token"], "token_id:" + std::to_string(ch["token_ids"][i].get<int>())) << ch.dump();
      for (const auto& top : content[i]["top_logprobs"])
        EXPECT_EQ(top["token"].get<std::string>().rfind("token_id:", 0), 0u) << ch.dump();
    }
  }
  EXPECT_EQ(entries, 4);
  EXPECT_EQ(call(server, "/v1/completions", {{"prompt", "x"}, {"return_tokens_as_token_ids", 1}}).status, 400);
}

}  // namespace
}  // namespace troupe
