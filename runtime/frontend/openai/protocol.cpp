#include "runtime/frontend/openai/protocol.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "runtime/rank/structured/json_schema.hpp"
#include "runtime/frontend/openai/vllm_fields.hpp"
#include "troupe/log.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;
using Error = std::optional<ApiError>;

// Parses the body into an object, refusing deep nesting before the parser sees it.
Error parse_object(std::string_view body, const Limits& limits, json* out) {
  if (json_depth(body, limits.max_json_depth + 1) > limits.max_json_depth)
    return invalid_json(fmt::format("nesting deeper than {} levels", limits.max_json_depth));
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_json("could not parse the request body (or it is not UTF-8)");
  if (!j.is_object()) return invalid_json("the request body must be a JSON object");
  *out = std::move(j);
  return std::nullopt;
}

// Fields vLLM does not document are ignored, as vLLM does (it logs them).
void log_unknown_fields(const json& j, std::initializer_list<const char*> known, Endpoint endpoint, const char* what) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool found = is_unimplemented_vllm_field(it.key(), endpoint);
    for (const char* k : known) found = found || it.key() == k;
    if (!found) TROUPE_LOG_DEBUG("{}: ignoring unknown field '{}'", what, it.key());
  }
}

// A field that is absent or null counts as unset (clients send null for defaults).
const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

// Fields that would change the answer and that troupe does not implement yet: refused,
// never silently ignored (a client asking for JSON must not get prose).
Error refuse_unimplemented(const json& j, bool chat) {
  auto refuse = [](const char* key, const std::string& why) {
    return invalid_param(key, fmt::format("{} is not implemented in troupe yet{}", key, why));
  };
  if (const json* rf = field(j, "response_format")) {
    const json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string()) return invalid_param("response_format", "must be an object with a string 'type'");
    if (*type != "text" && *type != "json_object" && *type != "json_schema")
      return refuse("response_format", fmt::format(" for type '{}'; 'text', 'json_object' and 'json_schema' are",
                                                   type->get<std::string>()));
  }
  for (const char* key : {"guided_regex", "guided_grammar"})
    if (field(j, key)) return refuse(key, " (structured outputs)");
  if (chat) {
    // OpenAI's deprecated functions/function_call (tools replaced them; vLLM has neither).
    if (field(j, "functions") || field(j, "function_call"))
      return refuse(field(j, "functions") ? "functions" : "function_call", "; send tools and tool_choice");
  } else {
    if (const json* suffix = field(j, "suffix"))
      if (!suffix->is_string() || !suffix->get<std::string>().empty()) return refuse("suffix", "");
  }
  if (field(j, "prompt_logprobs")) return refuse("prompt_logprobs", "");
  // vLLM's defaults (false, 1.0, null) are accepted; anything else asks for what troupe lacks.
  if (const json* beam = field(j, "use_beam_search")) {
    if (!beam->is_boolean()) return invalid_param("use_beam_search", "must be a boolean");
    if (beam->get<bool>()) return refuse("use_beam_search", " (beam search)");
  }
  if (const json* lp = field(j, "length_penalty")) {
    if (!lp->is_number()) return invalid_param("length_penalty", "must be a number");
    if (lp->get<double>() != 1.0) return refuse("length_penalty", " (it applies to beam search only)");
  }
  if (field(j, "logprob_token_ids")) return refuse("logprob_token_ids", "");  // vLLM refuses [] too
  if (const json* best_of = field(j, "best_of")) {
    const json* n = field(j, "n");
    if (!(best_of->is_number_integer() && best_of->get<int64_t>() == (n && n->is_number_integer() ? n->get<int64_t>() : 1)))
      return refuse("best_of", " (other than best_of = n)");
  }
  return std::nullopt;
}

Error get_string(const json& j, const char* key, std::string* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) return invalid_param(key, "must be a string");
  *out = v->get<std::string>();
  return std::nullopt;
}

Error get_bool(const json& j, const char* key, bool* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return invalid_param(key, "must be a boolean");
  *out = v->get<bool>();
  return std::nullopt;
}

Error get_double(const json& j, const char* key, std::optional<double>* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return invalid_param(key, "must be a number");
  double d = v->get<double>();
  if (!std::isfinite(d)) return invalid_param(key, "must be a finite number");
  *out = d;
  return std::nullopt;
}

// Integers: JSON integers, or floats with an integral value (5.0).
Error as_int(const json& v, const char* key, int64_t* out) {
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return std::nullopt;
  }
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    *out = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                          : static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      *out = static_cast<int64_t>(d);
      return std::nullopt;
    }
  }
  return invalid_param(key, "must be an integer");
}

Error get_int(const json& j, const char* key, std::optional<int64_t>* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (auto e = as_int(*v, key, &x)) return e;
  *out = x;
  return std::nullopt;
}

// vLLM's truncate_prompt_tokens: -1 (the model's maximum length) or at least 1; the engine
// checks it against max_model_len and the tokenizer's special tokens.
Error get_truncate_prompt_tokens(const json& j, std::optional<int64_t>* out) {
  if (auto e = get_int(j, "truncate_prompt_tokens", out)) return e;
  if (*out && **out < 1 && **out != -1)
    return invalid_param("truncate_prompt_tokens", "must be at least 1, or -1 for the model's maximum length");
  return std::nullopt;
}

Error parse_token_list(const json& v, const char* key, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(v.size());
  for (const auto& t : v) {
    int64_t x = 0;
    if (auto e = as_int(t, key, &x)) return invalid_param(key, "token ids must be integers");
    if (x < 0 || x > std::numeric_limits<int32_t>::max()) return invalid_param(key, fmt::format("token id {} is out of range", x));
    out->push_back(static_cast<int32_t>(x));
  }
  return std::nullopt;
}

// response_format json_object / json_schema (OpenAI), or vLLM's guided_json,
// guided_choice and structured_outputs: a schema is compiled here once so that one
// troupe cannot enforce is a 400 naming why.
Error parse_structured_output(const json& j, sampling::SamplingParams* s) {
  const json* schema = nullptr;
  const json* choice = nullptr;
  const char* param = "response_format";
  const char* choice_param = "structured_outputs";
  if (const json* rf = field(j, "response_format")) {
    const std::string type = field(*rf, "type")->get<std::string>();
    if (type == "json_object") s->structured_output = "json_object";
    if (type == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object() || !field(*js, "schema"))
        return invalid_param("response_format", "json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}");
      schema = field(*js, "schema");
    }
  }
  if (const json* g = field(j, "guided_json")) {
    if (schema || !s->structured_output.empty())
      return invalid_param("guided_json", "give only one of response_format, guided_json and structured_outputs");
    schema = g;
    param = "guided_json";
  }
  if (const json* so = field(j, "structured_outputs")) {
    // vLLM's newer form: {"json": schema} or {"json_object": true}; one constraint.
    if (schema || !s->structured_output.empty())
      return invalid_param("structured_outputs",
                           "give only one of response_format, guided_json and structured_outputs");
    if (!so->is_object()) return invalid_param("structured_outputs", "must be an object");
    for (const auto& [key, v] : so->items()) {
      if (v.is_null()) continue;
      if (key == "json") {
        schema = &v;
        param = "structured_outputs";
      } else if (key == "json_object") {
        if (!v.is_boolean()) return invalid_param("structured_outputs", "json_object must be a boolean");
        if (v.get<bool>()) s->structured_output = "json_object";
      } else if (key == "choice") {
        choice = &v;
      } else if (key == "regex" || key == "grammar" || key == "structural_tag") {
        return invalid_param("structured_outputs",
                             fmt::format("structured_outputs.{} is not implemented in troupe yet (json, "
                                         "json_object and choice are)", key));
      } else if (key != "disable_any_whitespace" && key != "disable_fallback" && key != "disable_additional_properties" &&
                 key != "whitespace_pattern") {
        return invalid_param("structured_outputs", fmt::format("unknown field '{}'", key));
      }
    }
    if ((schema != nullptr) + !s->structured_output.empty() + (choice != nullptr) > 1)
      return invalid_param("structured_outputs", "give one of json, json_object and choice");
  }
  if (const json* g = field(j, "guided_choice")) {
    if (schema || choice || !s->structured_output.empty())
      return invalid_param("guided_choice", "give only one of response_format, guided_json, guided_choice and "
                                            "structured_outputs");
    choice = g;
    choice_param = "guided_choice";
  }
  if (choice) {
    if (!choice->is_array() || choice->empty() || choice->size() > 1024)
      return invalid_param(choice_param, "choice must be a list of 1 to 1024 strings");
    for (const auto& c : *choice) {
      if (!c.is_string() || c.get<std::string>().empty())
        return invalid_param(choice_param, "choice must be a list of non-empty strings");
      s->choices.push_back(c.get<std::string>());
    }
    s->structured_output = "choice";
    return std::nullopt;
  }
  if (!schema) return std::nullopt;
  std::string text;
  if (schema->is_string()) {
    text = schema->get<std::string>();
  } else {
    text = schema->dump();
  }
  auto compiled = structured::compile_json_schema(text);
  if (!compiled.ok()) return invalid_param(param, compiled.status().message());
  s->structured_output = "json_schema";
  s->json_schema = std::move(text);
  return std::nullopt;
}

// Fields shared by /v1/completions and /v1/chat/completions.
Error parse_common(const json& j, const Limits& limits, bool chat, CommonFields* c) {
  auto& s = c->sampling;
  if (auto e = refuse_unimplemented(j, chat)) return e;
  if (auto e = parse_structured_output(j, &s)) return e;
  if (auto e = get_bool(j, "include_stop_str_in_output", &s.include_stop_str_in_output)) return e;
  if (auto e = get_string(j, "model", &c->model)) return e;
  if (auto e = get_string(j, "user", &c->user)) return e;
  if (const json* salt = field(j, "cache_salt")) {
    if (!salt->is_string() || salt->get<std::string>().empty())
      return invalid_param("cache_salt", "must be a non-empty string");
    c->cache_salt = salt->get<std::string>();
  }
  if (auto e = get_bool(j, "stream", &c->stream)) return e;
  if (auto e = get_truncate_prompt_tokens(j, &c->truncate_prompt_tokens)) return e;
  if (const json* bw = field(j, "bad_words")) {
    // vLLM's bad_words: a list of strings; admission tokenizes them (it has the tokenizer).
    if (!bw->is_array()) return invalid_param("bad_words", "must be a list of strings");
    if (bw->size() > limits.max_bad_words)
      return invalid_param("bad_words", fmt::format("at most {} words are allowed", limits.max_bad_words));
    for (const auto& w : *bw) {
      if (!w.is_string()) return invalid_param("bad_words", "must be a list of strings");
      if (w.get_ref<const std::string&>().size() > limits.max_stop_string_bytes)
        return invalid_param("bad_words", fmt::format("a word is longer than {} bytes", limits.max_stop_string_bytes));
      c->bad_words.push_back(w.get<std::string>());
    }
  }
  if (auto e = get_bool(j, "return_token_ids", &c->return_token_ids)) return e;
  if (auto e = get_bool(j, "return_tokens_as_token_ids", &c->return_tokens_as_token_ids)) return e;
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) return invalid_param("stream_options", "must be an object");
    if (auto e = get_bool(*so, "include_usage", &c->include_usage))
      return invalid_param("stream_options.include_usage", "must be a boolean");
    bool continuous = false;
    if (auto e = get_bool(*so, "continuous_usage_stats", &continuous))
      return invalid_param("stream_options.continuous_usage_stats", "must be a boolean");
    if (continuous)
      return invalid_param("stream_options.continuous_usage_stats",
                           "stream_options.continuous_usage_stats is not implemented in troupe yet");
  }
  if (const json* id = field(j, "request_id")) {
    // vLLM: the response's id is the endpoint's prefix and this; bounded and printable
    // because it is logged and sent back.
    if (!id->is_string() || id->get_ref<const std::string&>().empty())
      return invalid_param("request_id", "must be a non-empty string");
    const auto& text = id->get_ref<const std::string&>();
    if (text.size() > limits.max_request_id_bytes)
      return invalid_param("request_id", fmt::format("is longer than {} bytes", limits.max_request_id_bytes));
    for (unsigned char ch : text)
      if (ch < 0x20 || ch == 0x7f) return invalid_param("request_id", "must not contain control characters");
    c->request_id = text;
  }
  if (chat) {
    // Known (vLLM's default is true): with tools refused or tool_choice "none" no tool
    // call is made, so it changes nothing.
    bool parallel = true;
    if (auto e = get_bool(j, "parallel_tool_calls", &parallel)) return e;
  }

  std::optional<int64_t> max_tokens;
  if (auto e = get_int(j, "max_tokens", &max_tokens)) return e;
  if (chat) {
    std::optional<int64_t> mct;
    if (auto e = get_int(j, "max_completion_tokens", &mct)) return e;
    if (mct) max_tokens = mct;
  }
  c->max_tokens = max_tokens;
  if (chat && field(j, "max_completion_tokens")) c->body_names.emplace_back("max_tokens", "max_completion_tokens");

  // The model's defaults first; the request's fields override them.
  const SamplingDefaults& d = limits.sampling_defaults;
  if (d.temperature) s.temperature = static_cast<float>(*d.temperature);
  if (d.top_p) s.top_p = static_cast<float>(*d.top_p);
  if (d.min_p) s.min_p = static_cast<float>(*d.min_p);
  if (d.repetition_penalty) s.repetition_penalty = static_cast<float>(*d.repetition_penalty);
  if (d.top_k) s.top_k = static_cast<int32_t>(*d.top_k);
  // Numbers only here: their ranges are SamplingParams::validate's, at admission.
  for (auto [key, out] : {std::pair{"temperature", &s.temperature}, std::pair{"top_p", &s.top_p},
                          std::pair{"min_p", &s.min_p}, std::pair{"presence_penalty", &s.presence_penalty},
                          std::pair{"frequency_penalty", &s.frequency_penalty},
                          std::pair{"repetition_penalty", &s.repetition_penalty}}) {
    std::optional<double> d;
    if (auto e = get_double(j, key, &d)) return e;
    if (d) *out = static_cast<float>(*d);
  }

  std::optional<int64_t> i;
  if (auto e = get_int(j, "top_k", &i)) return e;
  if (i) {
    if (*i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max())
      return invalid_param("top_k", fmt::format("must be -1 (disabled) or a positive integer, got {}", *i));
    s.top_k = static_cast<int32_t>(*i);
  }
  i.reset();
  if (auto e = get_int(j, "n", &i)) return e;
  if (i) {
    if (*i < 1 || *i > limits.max_n)
      return invalid_param("n", fmt::format("must be between 1 and {}, got {}", limits.max_n, *i));
    c->n = static_cast<int>(*i);
  }
  i.reset();
  if (auto e = get_int(j, "seed", &i)) return e;
  if (i) s.seed = static_cast<uint64_t>(*i);

  if (auto e = get_bool(j, "ignore_eos", &s.ignore_eos)) return e;

  i.reset();
  if (auto e = get_int(j, "priority", &i)) return e;
  if (i) {
    if (*i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max())
      return invalid_param("priority", fmt::format("must fit in 32 bits, got {}", *i));
    c->priority = static_cast<int32_t>(*i);
  }
  if (const json* x = field(j, "vllm_xargs")) {
    // vLLM: an object whose values are strings, numbers or lists of them.
    if (!x->is_object()) return invalid_param("vllm_xargs", "must be an object");
    auto scalar = [](const json& v) { return v.is_string() || v.is_number(); };
    for (const auto& [key, v] : x->items()) {
      bool ok = scalar(v);
      if (v.is_array()) {
        ok = true;
        for (const auto& item : v) ok = ok && scalar(item);
      }
      if (!ok)
        return invalid_param("vllm_xargs", fmt::format("value of '{}' must be a string, a number or a list of them",
                                                       key));
    }
    s.extra_args = x->dump();
  }

  if (const json* st = field(j, "stop")) {
    s.stop.clear();
    if (st->is_string()) {
      s.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      if (st->size() > limits.max_stop_strings)
        return invalid_param("stop", fmt::format("at most {} stop strings are allowed, got {}",
                                                 limits.max_stop_strings, st->size()));
      for (const auto& x : *st) {
        if (!x.is_string()) return invalid_param("stop", "must be a string or a list of strings");
        s.stop.push_back(x.get<std::string>());
      }
    } else {
      return invalid_param("stop", "must be a string or a list of strings");
    }
    for (const auto& x : s.stop) {
      if (x.size() > limits.max_stop_string_bytes)
        return invalid_param("stop", fmt::format("a stop string is longer than {} bytes", limits.max_stop_string_bytes));
    }
  }
  if (const json* st = field(j, "stop_token_ids")) {
    if (!st->is_array()) return invalid_param("stop_token_ids", "must be a list of token ids");
    if (st->size() > limits.max_stop_token_ids)
      return invalid_param("stop_token_ids", fmt::format("at most {} ids are allowed", limits.max_stop_token_ids));
    if (auto e = parse_token_list(*st, "stop_token_ids", &s.stop_token_ids)) return e;
  }

  if (const json* lb = field(j, "logit_bias")) {
    // OpenAI: token ids (as strings: JSON keys) to biases; vLLM clamps them to [-100, 100].
    if (!lb->is_object()) return invalid_param("logit_bias", "must be an object of token ids to biases");
    for (const auto& [key, v] : lb->items()) {
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
        return invalid_param("logit_bias", fmt::format("keys must be token ids, got '{}'", key));
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        return invalid_param("logit_bias", fmt::format("the bias of token {} must be a number", id));
      s.logit_bias.emplace_back(static_cast<int32_t>(id),
                                static_cast<float>(std::clamp(v.get<double>(), -100.0, 100.0)));
    }
  }
  if (const json* at = field(j, "allowed_token_ids")) {
    if (!at->is_array() || at->empty()) return invalid_param("allowed_token_ids", "must be a non-empty list of token ids");
    if (auto e = parse_token_list(*at, "allowed_token_ids", &s.allowed_token_ids)) return e;
  }
  i.reset();
  if (auto e = get_int(j, "min_tokens", &i)) return e;
  if (i) {
    if (*i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max())
      return invalid_param("min_tokens", fmt::format("must be a non-negative integer, got {}", *i));
    s.min_tokens = static_cast<int32_t>(*i);
  }

  if (!chat) {
    i.reset();
    if (auto e = get_int(j, "logprobs", &i)) return e;
    // A count (-1 is the engine's "none"); its bound is SamplingParams::kMaxLogprobs, at admission.
    if (i && *i < 0) return invalid_param("logprobs", fmt::format("must be a non-negative integer, got {}", *i));
    if (i) s.logprobs = static_cast<int32_t>(std::min<int64_t>(*i, INT32_MAX));
  }
  return std::nullopt;
}

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
                         "include_stop_str_in_output", "best_of", "suffix", "response_format", "guided_json", "structured_outputs", "guided_choice",
                         "cache_salt", "use_beam_search", "length_penalty", "logprob_token_ids",
                         "return_token_ids", "return_tokens_as_token_ids", "truncate_prompt_tokens", "request_id"},
                     Endpoint::completions, "completions");
  if (auto e = refuse_unimplemented_vllm_fields(j, Endpoint::completions)) return e;
  *out = CompletionRequest{};
  if (auto e = parse_common(j, limits, /*chat=*/false, &out->common)) return e;
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
                         "include_stop_str_in_output", "best_of", "response_format", "guided_json", "structured_outputs", "guided_choice", "tool_choice",
                         "tools", "parallel_tool_calls", "continue_final_message", "cache_salt", "use_beam_search", "length_penalty",
                         "logprob_token_ids", "return_token_ids", "return_tokens_as_token_ids",
                         "truncate_prompt_tokens", "chat_template", "chat_template_kwargs", "request_id",
                         "parallel_tool_calls", "tools", "functions", "include_reasoning"},
                     Endpoint::chat, "chat.completions");
  if (auto e = refuse_unimplemented_vllm_fields(j, Endpoint::chat)) return e;
  *out = ChatCompletionRequest{};
  if (auto e = parse_common(j, limits, /*chat=*/true, &out->common)) return e;
  if (auto e = parse_tools(j, &out->tools, &out->common.sampling)) return e;
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
