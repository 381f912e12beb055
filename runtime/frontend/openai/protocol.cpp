#include "runtime/frontend/openai/protocol.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

#include "runtime/frontend/openai/body_fields.hpp"
#include "runtime/frontend/openai/common_fields.hpp"
#include "runtime/frontend/openai/vllm_fields.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;
using body::Error;
using body::field;
using body::get_bool;
using body::get_int;
using body::get_string;
using body::get_truncate_prompt_tokens;
using body::log_unknown_fields;
using body::parse_object;
using body::parse_token_list;

Error parse_messages(const json& j, std::vector<ChatMessage>* out) {
  const json* m = field(j, "messages");
  if (!m) return invalid_param("messages", "is required");
  if (!m->is_array() || m->empty()) return invalid_param("messages", "must be a non-empty list of messages");
  for (const auto& msg : *m) {
    if (!msg.is_object()) return invalid_param("messages", "each message must be an object");
    ChatMessage cm;
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string() || role->get<std::string>().empty())
      return invalid_param("messages", "each message needs a string 'role'");
    cm.role = role->get<std::string>();
    auto content = msg.find("content");
    if (content != msg.end() && !content->is_null()) {
      if (content->is_string()) {
        cm.content = content->get<std::string>();
      } else if (content->is_array()) {
        // Content parts: only text parts are supported by a text model.
        for (const auto& part : *content) {
          if (!part.is_object()) return invalid_param("messages", "content parts must be objects");
          auto type = part.find("type");
          auto text = part.find("text");
          if (type == part.end() || *type != "text" || text == part.end() || !text->is_string())
            return invalid_param("messages", "only content parts of type 'text' are supported");
          cm.content += text->get<std::string>();
        }
      } else {
        return invalid_param("messages", "'content' must be a string or a list of content parts");
      }
    }
    out->push_back(std::move(cm));
  }
  return std::nullopt;
}

/// The chat template's inputs, from the body parsed again keeping key order (templates
/// print and tojson dicts in the client's order).
Error parse_chat_prompt(std::string_view body, const json& j, bool add_generation_prompt, bool continue_final,
                        chat::ChatPromptRequest* out) {
  using ojson = nlohmann::ordered_json;
  const ojson o = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object()) return invalid_param("messages", "the body is not a JSON object");
  *out = chat::ChatPromptRequest{};
  out->add_generation_prompt = add_generation_prompt;
  out->continue_final_message = continue_final;
  if (o.contains("messages") && o["messages"].is_array())
    for (const auto& m : o["messages"]) {
      auto tm = chat::template_message(m);
      if (!tm.ok()) return invalid_param("messages", tm.status().message());
      out->messages.push_back(std::move(tm).value());
    }
  if (field(j, "tools")) {
    auto tools = chat::template_tools(o["tools"]);
    if (!tools.ok()) return invalid_param("tools", tools.status().message());
    out->tools = std::move(tools).value();
  }
  if (const json* t = field(j, "chat_template")) {
    if (!t->is_string()) return invalid_param("chat_template", "must be a string");
    out->chat_template = t->get<std::string>();
  }
  if (const json* k = field(j, "chat_template_kwargs")) {
    if (!k->is_object()) return invalid_param("chat_template_kwargs", "must be an object");
    out->kwargs = o["chat_template_kwargs"];
    for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"})
      if (k->contains(reserved))
        return invalid_param("chat_template_kwargs", fmt::format("may not set '{}' (the request's own field sets it)", reserved));
  }
  return std::nullopt;
}

}  // namespace

int json_depth(std::string_view text, int cap) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '[' || ch == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest >= cap) return deepest;
    } else if (ch == ']' || ch == '}') {
      if (depth > 0) --depth;
    }
  }
  return deepest;
}

std::optional<ApiError> parse_completion_request(std::string_view body, const Limits& limits,
                                                 CompletionRequest* out) {
  json j;
  if (auto e = parse_object(body, limits, &j)) return e;
  log_unknown_fields(j, {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n",
                         "stop", "stop_token_ids", "seed", "presence_penalty", "frequency_penalty",
                         "repetition_penalty", "logprobs", "echo", "ignore_eos", "user", "stream",
                         "stream_options", "priority", "vllm_xargs", "logit_bias",
                         "allowed_token_ids", "min_tokens", "bad_words",
                         "include_stop_str_in_output", "best_of", "suffix", "response_format", "guided_json", "guided_regex", "guided_grammar", "guided_whitespace_pattern",
                         "guided_decoding_backend", "structural_tag", "structured_outputs", "guided_choice",
                         "cache_salt", "use_beam_search", "length_penalty", "logprob_token_ids",
                         "return_token_ids", "return_tokens_as_token_ids", "truncate_prompt_tokens", "request_id"},
                     Endpoint::completions, "completions");
  if (auto e = refuse_unimplemented_vllm_fields(j, Endpoint::completions)) return e;
  *out = CompletionRequest{};
  const nlohmann::ordered_json ordered = body::ordered_body(body, j);
  if (auto e = body::parse_common(j, limits, /*chat=*/false, &out->common, ordered.is_object() ? &ordered : nullptr))
    return e;
  if (auto e = get_bool(j, "echo", &out->echo)) return e;

  const json* p = field(j, "prompt");
  if (!p) return invalid_param("prompt", "is required");
  if (p->is_string()) {
    Prompt pr;
    pr.text = p->get<std::string>();
    out->prompts.push_back(std::move(pr));
  } else if (p->is_array()) {
    if (p->empty()) return invalid_param("prompt", "must not be empty");
    if (p->size() > limits.max_prompts && !(*p)[0].is_number())
      return invalid_param("prompt", fmt::format("at most {} prompts per request", limits.max_prompts));
    if ((*p)[0].is_number()) {
      Prompt pr;
      pr.is_tokens = true;
      if (auto e = parse_token_list(*p, "prompt", &pr.token_ids)) return e;
      out->prompts.push_back(std::move(pr));
    } else {
      for (const auto& x : *p) {
        Prompt pr;
        if (x.is_string()) {
          pr.text = x.get<std::string>();
        } else if (x.is_array()) {
          pr.is_tokens = true;
          if (auto e = parse_token_list(x, "prompt", &pr.token_ids)) return e;
        } else {
          return invalid_param("prompt", "must be a string, a list of strings, token ids, or a list of token-id lists");
        }
        out->prompts.push_back(std::move(pr));
      }
    }
  } else {
    return invalid_param("prompt", "must be a string, a list of strings, token ids, or a list of token-id lists");
  }
  for (const auto& pr : out->prompts) {
    if (pr.is_tokens ? pr.token_ids.empty() : pr.text.empty()) return invalid_param("prompt", "must not be empty");
  }
  if (out->prompts.size() * static_cast<size_t>(out->common.n) > static_cast<size_t>(limits.max_n) * 4)
    return invalid_param("n", "too many choices in total (prompts x n)");
  return std::nullopt;
}

std::optional<ApiError> parse_chat_request(std::string_view body, const Limits& limits, ChatCompletionRequest* out) {
  json j;
  if (auto e = parse_object(body, limits, &j)) return e;
  log_unknown_fields(j, {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                         "top_k", "min_p", "n", "stop", "stop_token_ids", "seed", "presence_penalty",
                         "frequency_penalty", "repetition_penalty", "logprobs", "top_logprobs", "ignore_eos",
                         "user", "stream", "stream_options", "add_generation_prompt", "priority", "vllm_xargs", "logit_bias",
                         "allowed_token_ids", "min_tokens", "bad_words",
                         "include_stop_str_in_output", "best_of", "response_format", "guided_json", "guided_regex", "guided_grammar", "guided_whitespace_pattern",
                         "guided_decoding_backend", "structural_tag", "structured_outputs", "guided_choice", "tool_choice",
                         "tools", "parallel_tool_calls", "continue_final_message", "cache_salt", "use_beam_search", "length_penalty",
                         "logprob_token_ids", "return_token_ids", "return_tokens_as_token_ids",
                         "truncate_prompt_tokens", "chat_template", "chat_template_kwargs", "request_id",
                         "parallel_tool_calls", "tools", "functions", "include_reasoning"},
                     Endpoint::chat, "chat.completions");
  if (auto e = refuse_unimplemented_vllm_fields(j, Endpoint::chat)) return e;
  *out = ChatCompletionRequest{};
  const nlohmann::ordered_json ordered = body::ordered_body(body, j);
  const nlohmann::ordered_json* keys_in_order = ordered.is_object() ? &ordered : nullptr;
  if (auto e = body::parse_common(j, limits, /*chat=*/true, &out->common, keys_in_order)) return e;
  if (auto e = parse_tools(j, &out->tools, &out->common.sampling, limits.grammar, keys_in_order)) return e;
  if (auto e = parse_messages(j, &out->messages)) return e;
  if (auto e = get_bool(j, "add_generation_prompt", &out->add_generation_prompt)) return e;
  if (auto e = get_bool(j, "continue_final_message", &out->continue_final_message)) return e;
  if (out->continue_final_message && out->add_generation_prompt)
    return invalid_param("continue_final_message", "cannot be true while add_generation_prompt is (set it to false)");
  if (auto e = get_bool(j, "include_reasoning", &out->include_reasoning)) return e;
  if (auto e = parse_chat_prompt(body, j, out->add_generation_prompt, out->continue_final_message, &out->chat))
    return e;
  bool logprobs = false;
  if (auto e = get_bool(j, "logprobs", &logprobs)) return e;
  std::optional<int64_t> top;
  if (auto e = get_int(j, "top_logprobs", &top)) return e;
  if (top) {
    if (*top < 0) return invalid_param("top_logprobs", fmt::format("must be a non-negative integer, got {}", *top));
    // vLLM's default is 0, sent by clients without logprobs.
    if (!logprobs && *top > 0) return invalid_param("top_logprobs", "requires logprobs to be true");
    out->top_logprobs = static_cast<int>(std::min<int64_t>(*top, INT32_MAX));  // its bound: at admission
  }
  if (logprobs) out->common.sampling.logprobs = out->top_logprobs;
  out->common.body_names.emplace_back("logprobs", "top_logprobs");
  return std::nullopt;
}

std::optional<ApiError> parse_tokenize_request(std::string_view body, const Limits& limits, TokenizeRequest* out) {
  json j;
  if (auto e = parse_object(body, limits, &j)) return e;
  *out = TokenizeRequest{};
  if (auto e = get_string(j, "model", &out->model)) return e;
  if (auto e = get_bool(j, "add_special_tokens", &out->add_special_tokens)) return e;
  if (auto e = get_bool(j, "add_generation_prompt", &out->add_generation_prompt)) return e;
  if (auto e = get_bool(j, "continue_final_message", &out->continue_final_message)) return e;
  if (out->continue_final_message && out->add_generation_prompt)
    return invalid_param("continue_final_message", "cannot be true while add_generation_prompt is (set it to false)");
  if (field(j, "messages")) {
    out->has_messages = true;
    if (auto e = parse_messages(j, &out->messages)) return e;
    return parse_chat_prompt(body, j, out->add_generation_prompt, out->continue_final_message, &out->chat);
  }
  const json* p = field(j, "prompt");
  if (!p) return invalid_param("prompt", "is required (or messages)");
  if (!p->is_string()) return invalid_param("prompt", "must be a string");
  out->prompt = p->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> parse_detokenize_request(std::string_view body, const Limits& limits,
                                                 DetokenizeRequest* out) {
  json j;
  if (auto e = parse_object(body, limits, &j)) return e;
  *out = DetokenizeRequest{};
  if (auto e = get_string(j, "model", &out->model)) return e;
  const json* t = field(j, "tokens");
  if (!t) return invalid_param("tokens", "is required");
  if (!t->is_array()) return invalid_param("tokens", "must be a list of token ids");
  return parse_token_list(*t, "tokens", &out->tokens);
}

sampling::SamplingParams choice_sampling(const sampling::SamplingParams& base, int index) {
  sampling::SamplingParams s = base;
  if (s.seed) s.seed = *s.seed + static_cast<uint64_t>(index);
  return s;
}

std::optional<ApiError> parse_embedding_request(std::string_view body, const Limits& limits, EmbeddingRequest* out) {
  json j;
  if (auto e = parse_object(body, limits, &j)) return e;
  log_unknown_fields(j, {"model", "input", "encoding_format", "dimensions", "user", "truncate_prompt_tokens",
                         "normalize"},
                     Endpoint::embeddings, "embeddings");
  if (auto e = refuse_unimplemented_vllm_fields(j, Endpoint::embeddings)) return e;
  if (auto e = get_string(j, "model", &out->model)) return e;
  if (auto e = get_string(j, "user", &out->user)) return e;
  std::string format = "float";
  if (auto e = get_string(j, "encoding_format", &format)) return e;
  if (format != "float" && format != "base64") return invalid_param("encoding_format", "must be 'float' or 'base64'");
  out->base64 = format == "base64";
  if (auto e = get_int(j, "dimensions", &out->dimensions)) return e;
  if (out->dimensions && *out->dimensions < 1) return invalid_param("dimensions", "must be at least 1");
  if (auto e = get_truncate_prompt_tokens(j, &out->truncate_prompt_tokens)) return e;
  if (const json* n = field(j, "normalize")) {
    if (!n->is_boolean()) return invalid_param("normalize", "must be a boolean");
    out->normalize = n->get<bool>();
  }
  const json* in = field(j, "input");
  if (!in) return invalid_param("input", "is required");
  const char* shape = "must be a string, a list of strings, token ids, or a list of token-id lists";
  if (in->is_string()) {
    out->inputs.push_back(Prompt{false, in->get<std::string>(), {}});
  } else if (in->is_array()) {
    if (in->empty()) return invalid_param("input", "must not be empty");
    if ((*in)[0].is_number()) {
      Prompt p{true, "", {}};
      if (auto e = parse_token_list(*in, "input", &p.token_ids)) return e;
      out->inputs.push_back(std::move(p));
    } else {
      if (in->size() > limits.max_prompts)
        return invalid_param("input", fmt::format("at most {} inputs per request", limits.max_prompts));
      for (const auto& x : *in) {
        if (x.is_string()) {
          out->inputs.push_back(Prompt{false, x.get<std::string>(), {}});
        } else if (x.is_array()) {
          Prompt p{true, "", {}};
          if (auto e = parse_token_list(x, "input", &p.token_ids)) return e;
          out->inputs.push_back(std::move(p));
        } else {
          return invalid_param("input", shape);
        }
      }
    }
  } else {
    return invalid_param("input", shape);
  }
  for (const auto& p : out->inputs)
    if (p.is_tokens ? p.token_ids.empty() : p.text.empty()) return invalid_param("input", "must not be empty");
  return std::nullopt;
}

std::optional<ApiError> parse_score_request(std::string_view body, const Limits& limits, ScoreRequest* out) {
  json j;
  if (auto e = parse_object(body, limits, &j)) return e;
  log_unknown_fields(j, {"model", "text_1", "text_2", "truncate_prompt_tokens"}, Endpoint::score, "score");
  if (auto e = refuse_unimplemented_vllm_fields(j, Endpoint::score)) return e;
  if (auto e = get_string(j, "model", &out->model)) return e;
  if (auto e = get_truncate_prompt_tokens(j, &out->truncate_prompt_tokens)) return e;
  auto texts = [&](const char* key, std::vector<std::string>* v) -> Error {
    const json* t = field(j, key);
    if (!t) return invalid_param(key, "is required");
    if (t->is_string()) {
      v->push_back(t->get<std::string>());
    } else if (t->is_array()) {
      if (t->size() > limits.max_prompts) return invalid_param(key, fmt::format("at most {} texts", limits.max_prompts));
      for (const auto& x : *t) {
        if (!x.is_string()) return invalid_param(key, "must be a string or a list of strings");
        v->push_back(x.get<std::string>());
      }
    } else {
      return invalid_param(key, "must be a string or a list of strings");
    }
    if (v->empty()) return invalid_param(key, "must not be empty");
    for (const auto& s : *v)
      if (s.empty()) return invalid_param(key, "must not contain empty texts");
    return std::nullopt;
  };
  if (auto e = texts("text_1", &out->text_1)) return e;
  if (auto e = texts("text_2", &out->text_2)) return e;
  if (out->text_1.size() != 1 && out->text_1.size() != out->text_2.size())
    return invalid_param("text_1", "must be one text, or as many texts as text_2");
  return std::nullopt;
}

std::optional<ApiError> parse_rerank_request(std::string_view body, const Limits& limits, RerankRequest* out) {
  json j;
  if (auto e = parse_object(body, limits, &j)) return e;
  log_unknown_fields(j, {"model", "query", "documents", "top_n", "return_documents", "truncate_prompt_tokens"},
                     Endpoint::rerank, "rerank");
  if (auto e = refuse_unimplemented_vllm_fields(j, Endpoint::rerank)) return e;
  if (auto e = get_string(j, "model", &out->model)) return e;
  if (auto e = get_truncate_prompt_tokens(j, &out->truncate_prompt_tokens)) return e;
  std::optional<int64_t> top_n;
  if (auto e = get_int(j, "top_n", &top_n)) return e;
  if (top_n && *top_n < 0) return invalid_param("top_n", "must be at least 0 (0 returns every document)");
  out->top_n = top_n.value_or(0);
  if (auto e = get_bool(j, "return_documents", &out->return_documents)) return e;
  const json* q = field(j, "query");
  if (!q) return invalid_param("query", "is required");
  if (!q->is_string()) return invalid_param("query", "must be a string");
  out->query = q->get<std::string>();
  if (out->query.empty()) return invalid_param("query", "must not be empty");
  const json* docs = field(j, "documents");
  if (!docs) return invalid_param("documents", "is required");
  if (!docs->is_array()) return invalid_param("documents", "must be a list of strings");
  if (docs->empty()) return invalid_param("documents", "must not be empty");
  if (docs->size() > limits.max_prompts)
    return invalid_param("documents", fmt::format("at most {} documents", limits.max_prompts));
  for (size_t i = 0; i < docs->size(); ++i) {
    const json& d = (*docs)[i];
    const json* text = d.is_string() ? &d : d.is_object() ? field(d, "text") : nullptr;
    if (!text || !text->is_string())
      return invalid_param("documents", fmt::format("document {} must be a string (or an object with a string 'text')", i));
    out->documents.push_back(text->get<std::string>());
    if (out->documents.back().empty()) return invalid_param("documents", fmt::format("document {} is empty", i));
  }
  return std::nullopt;
}

ApiError admission_error(const Status& status, const std::string& engine_field, const CommonFields& common) {
  std::string name = engine_field;
  for (const auto& [engine_name, body_name] : common.body_names)
    if (engine_name == engine_field) name = body_name;
  ApiError e = from_status(status, name);
  // SamplingParams::validate's messages lead with the field: the body's name there too.
  if (name != engine_field && !engine_field.empty() && e.message.rfind(engine_field + " ", 0) == 0)
    e.message = name + e.message.substr(engine_field.size());
  return e;
}

}  // namespace troupe::openai
