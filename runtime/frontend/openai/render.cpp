#include "runtime/frontend/openai/render.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <random>

#include <fmt/format.h>

namespace troupe::openai {
namespace {

using json = nlohmann::json;

// Generated text may hold bytes that are not valid UTF-8 (a token can end mid
// character): replace them instead of throwing.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json null_or(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
json null_or(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// Completions logprobs: parallel lists (tokens, token_logprobs, top_logprobs, text_offset).
json completion_logprobs(const Choice& c, const TokenText& token_text) {
  if (!c.has_logprobs) return nullptr;
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = c.text_offset;
  for (const auto& e : c.logprobs) {
    std::string t = token_text ? token_text(e.token_id) : std::to_string(e.token_id);
    tokens.push_back(t);
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) top[token_text ? token_text(id) : std::to_string(id)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

// Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
json chat_logprobs(const Choice& c, const TokenText& token_text) {
  if (!c.has_logprobs) return nullptr;
  json content = json::array();
  for (const auto& e : c.logprobs) {
    std::string t = token_text ? token_text(e.token_id) : std::to_string(e.token_id);
    json top = json::array();
    for (const auto& [id, lp] : e.top) {
      std::string tt = token_text ? token_text(id) : std::to_string(id);
      top.push_back({{"token", tt}, {"logprob", lp}, {"bytes", bytes_of(tt)}});
    }
    content.push_back({{"token", t}, {"logprob", e.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

}  // namespace

// vLLM's return_token_ids: the output's ids ride on the choice when they were asked
// for; the prompt's too for completions (chat carries them on the response, as vLLM).
json with_token_ids(json choice, const Choice& c, bool prompt_ids = true) {
  if (prompt_ids && c.prompt_token_ids) choice["prompt_token_ids"] = *c.prompt_token_ids;
  if (c.token_ids) choice["token_ids"] = *c.token_ids;
  return choice;
}

std::string make_request_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:016x}{:016x}", prefix, rng(), rng());
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string render_completion(const std::string& id, int64_t created, const std::string& model,
                              const std::vector<Choice>& choices, const Usage& usage, const TokenText& token_text) {
  json cs = json::array();
  for (const auto& c : choices) {
    cs.push_back(with_token_ids({{"index", c.index},
                                 {"text", c.text},
                                 {"logprobs", completion_logprobs(c, token_text)},
                                 {"finish_reason", null_or(c.finish_reason)},
                                 {"stop_reason", null_or(c.stop_reason)}},
                                c));
  }
  return dump({{"id", id},
               {"object", "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", cs},
               {"usage", usage_json(usage)}});
}

std::string render_chat_completion(const std::string& id, int64_t created, const std::string& model,
                                   const std::vector<Choice>& choices, const Usage& usage,
                                   const TokenText& token_text) {
  json cs = json::array();
  for (const auto& c : choices) {
    json message = {{"role", "assistant"}, {"content", c.content_null ? json(nullptr) : json(c.text)}};
    // vLLM's field, and the name its newer releases use beside it.
    if (c.has_reasoning) message["reasoning_content"] = message["reasoning"] = null_or(c.reasoning);
    if (!c.tool_calls.empty()) {
      json calls = json::array();
      for (const auto& t : c.tool_calls)
        calls.push_back({{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
      message["tool_calls"] = std::move(calls);
    }
    cs.push_back(with_token_ids({{"index", c.index},
                                 {"message", message},
                                 {"logprobs", chat_logprobs(c, token_text)},
                                 {"finish_reason", null_or(c.finish_reason)},
                                 {"stop_reason", null_or(c.stop_reason)}},
                                c, /*prompt_ids=*/false));
  }
  json out = {{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", model},
              {"choices", cs},
              {"usage", usage_json(usage)}};
  if (!choices.empty() && choices[0].prompt_token_ids) out["prompt_token_ids"] = *choices[0].prompt_token_ids;
  return dump(out);
}

std::string render_completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                    const Choice& c, const TokenText& token_text) {
  json choice = with_token_ids({{"index", c.index},
                                {"text", c.text},
                                {"logprobs", completion_logprobs(c, token_text)},
                                {"finish_reason", null_or(c.finish_reason)},
                                {"stop_reason", null_or(c.stop_reason)}},
                               c);
  return dump({{"id", id},
               {"object", "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", json::array({choice})}});
}

std::string render_chat_chunk(const std::string& id, int64_t created, const std::string& model, const Choice& c,
                              bool first, const TokenText& token_text) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (c.reasoning && !c.reasoning->empty()) delta["reasoning_content"] = delta["reasoning"] = *c.reasoning;
  if (first || !c.text.empty()) delta["content"] = c.text;
  if (!c.tool_call_deltas.empty()) {
    json calls = json::array();
    for (const auto& t : c.tool_call_deltas) {
      json call = json::object();
      if (t.id) {
        call["id"] = *t.id;
        call["type"] = "function";
      }
      call["index"] = t.index;
      json function = json::object();
      if (t.name) function["name"] = *t.name;
      function["arguments"] = t.arguments;
      call["function"] = std::move(function);
      calls.push_back(std::move(call));
    }
    delta["tool_calls"] = std::move(calls);
  }
  json choice = with_token_ids({{"index", c.index},
                                {"delta", delta},
                                {"logprobs", chat_logprobs(c, token_text)},
                                {"finish_reason", null_or(c.finish_reason)},
                                {"stop_reason", null_or(c.stop_reason)}},
                               c, /*prompt_ids=*/false);
  json out = {{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
  if (c.prompt_token_ids) out["prompt_token_ids"] = *c.prompt_token_ids;
  return dump(out);
}

std::string render_usage_chunk(const std::string& id, int64_t created, const std::string& model, bool chat,
                               const Usage& usage) {
  return dump({{"id", id},
               {"object", chat ? "chat.completion.chunk" : "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", json::array()},
               {"usage", usage_json(usage)}});
}

std::string sse_event(const std::string& json_text) { return "data: " + json_text + "\n\n"; }

std::string render_models(const std::string& served_name, const std::string& root, int64_t created,
                          int64_t max_model_len, const std::vector<LoraCard>& loras) {
  json model = {{"id", served_name},
                {"object", "model"},
                {"created", created},
                {"owned_by", "troupe"},
                {"root", root},
                {"parent", nullptr},
                {"max_model_len", max_model_len}};
  json data = json::array({model});
  for (const LoraCard& l : loras)
    data.push_back({{"id", l.name},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "troupe"},
                    {"root", l.path},
                    {"parent", served_name}});
  return dump({{"object", "list"}, {"data", data}});
}

std::string render_tokenize(const std::vector<int32_t>& tokens, int64_t max_model_len) {
  return dump({{"count", tokens.size()}, {"max_model_len", max_model_len}, {"tokens", tokens}});
}

std::string render_detokenize(const std::string& text) { return dump({{"prompt", text}}); }

std::string render_version(const std::string& version) { return dump({{"version", version}}); }

std::string base64_encode(const void* data, size_t size) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t n = (uint32_t{p[i]} << 16) | (i + 1 < size ? uint32_t{p[i + 1]} << 8 : 0) |
                       (i + 2 < size ? uint32_t{p[i + 2]} : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[n & 63] : '=';
  }
  return out;
}

std::string render_embeddings(const std::string& id, int64_t created, const std::string& model, const char* object,
                              const std::vector<std::vector<float>>& vectors, bool base64, int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json v = base64 ? json(base64_encode(vectors[i].data(), vectors[i].size() * sizeof(float))) : json(vectors[i]);
    data.push_back({{"index", i}, {"object", object}, {object == std::string("pooling") ? "data" : "embedding", v}});
  }
  json j = {{"id", id},       {"object", "list"},
            {"created", created}, {"model", model},
            {"data", data},   {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string render_scores(const std::string& id, int64_t created, const std::string& model,
                          const std::vector<double>& scores, int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < scores.size(); ++i) data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i]}});
  json j = {{"id", id},       {"object", "list"},
            {"created", created}, {"model", model},
            {"data", data},   {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string render_rerank(const std::string& id, const std::string& model, const std::vector<RerankResult>& results,
                          const std::vector<std::string>& documents, int64_t total_tokens) {
  json out = json::array();
  for (const auto& r : results) {
    json item = {{"index", r.index}, {"relevance_score", r.relevance_score}};
    if (!documents.empty()) item["document"] = {{"text", documents.at(r.index)}};
    out.push_back(std::move(item));
  }
  json j = {{"id", id}, {"model", model}, {"usage", {{"total_tokens", total_tokens}}}, {"results", out}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace troupe::openai
