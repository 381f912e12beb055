#include "runtime/frontend/openai/common_fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace troupe::openai::body {
namespace {

using json = nlohmann::json;

// include_stop_str_in_output, model, user, cache_salt, stream, truncate_prompt_tokens.
Error parse_output_options(const json& j, CommonFields* c) {
  if (auto e = get_bool(j, "include_stop_str_in_output", &c->sampling.include_stop_str_in_output)) return e;
  if (auto e = get_string(j, "model", &c->model)) return e;
  if (auto e = get_string(j, "user", &c->user)) return e;
  if (const json* salt = field(j, "cache_salt")) {
    if (!salt->is_string() || salt->get<std::string>().empty())
      return invalid_param("cache_salt", "must be a non-empty string");
    c->cache_salt = salt->get<std::string>();
  }
  if (auto e = get_bool(j, "stream", &c->stream)) return e;
  return get_truncate_prompt_tokens(j, &c->truncate_prompt_tokens);
}

// vLLM's bad_words: a list of strings; admission tokenizes them (it has the tokenizer).
Error parse_bad_words(const json& j, const Limits& limits, CommonFields* c) {
  const json* bw = field(j, "bad_words");
  if (!bw) return std::nullopt;
  if (!bw->is_array()) return invalid_param("bad_words", "must be a list of strings");
  if (bw->size() > limits.max_bad_words)
    return invalid_param("bad_words", fmt::format("at most {} words are allowed", limits.max_bad_words));
  for (const auto& w : *bw) {
    if (!w.is_string()) return invalid_param("bad_words", "must be a list of strings");
    if (w.get_ref<const std::string&>().size() > limits.max_stop_string_bytes)
      return invalid_param("bad_words", fmt::format("a word is longer than {} bytes", limits.max_stop_string_bytes));
    c->bad_words.push_back(w.get<std::string>());
  }
  return std::nullopt;
}

// return_token_ids, return_tokens_as_token_ids, stream_options.
Error parse_stream_options(const json& j, CommonFields* c) {
  if (auto e = get_bool(j, "return_token_ids", &c->return_token_ids)) return e;
  if (auto e = get_bool(j, "return_tokens_as_token_ids", &c->return_tokens_as_token_ids)) return e;
  const json* so = field(j, "stream_options");
  if (!so) return std::nullopt;
  if (!so->is_object()) return invalid_param("stream_options", "must be an object");
  if (auto e = get_bool(*so, "include_usage", &c->include_usage))
    return invalid_param("stream_options.include_usage", "must be a boolean");
  bool continuous = false;
  if (auto e = get_bool(*so, "continuous_usage_stats", &continuous))
    return invalid_param("stream_options.continuous_usage_stats", "must be a boolean");
  if (continuous)
    return invalid_param("stream_options.continuous_usage_stats",
                         "stream_options.continuous_usage_stats is not implemented in troupe yet");
  return std::nullopt;
}

// vLLM: the response's id is the endpoint's prefix and this; bounded and printable
// because it is logged and sent back.
Error parse_request_id(const json& j, const Limits& limits, CommonFields* c) {
  const json* id = field(j, "request_id");
  if (!id) return std::nullopt;
  if (!id->is_string() || id->get_ref<const std::string&>().empty())
    return invalid_param("request_id", "must be a non-empty string");
  const auto& text = id->get_ref<const std::string&>();
  if (text.size() > limits.max_request_id_bytes)
    return invalid_param("request_id", fmt::format("is longer than {} bytes", limits.max_request_id_bytes));
  for (unsigned char ch : text)
    if (ch < 0x20 || ch == 0x7f) return invalid_param("request_id", "must not contain control characters");
  c->request_id = text;
  return std::nullopt;
}

// max_tokens, or chat's max_completion_tokens (which wins, and names the field in errors).
Error parse_max_tokens(const json& j, bool chat, CommonFields* c) {
  std::optional<int64_t> max_tokens;
  if (auto e = get_int(j, "max_tokens", &max_tokens)) return e;
  if (chat) {
    std::optional<int64_t> mct;
    if (auto e = get_int(j, "max_completion_tokens", &mct)) return e;
    if (mct) max_tokens = mct;
  }
  c->max_tokens = max_tokens;
  if (chat && field(j, "max_completion_tokens")) c->body_names.emplace_back("max_tokens", "max_completion_tokens");
  return std::nullopt;
}

// The model's defaults first, then the request's numbers over them. Numbers only here:
// their ranges are SamplingParams::validate's, at admission.
Error parse_sampling_numbers(const json& j, const SamplingDefaults& d, sampling::SamplingParams* s) {
  if (d.temperature) s->temperature = static_cast<float>(*d.temperature);
  if (d.top_p) s->top_p = static_cast<float>(*d.top_p);
  if (d.min_p) s->min_p = static_cast<float>(*d.min_p);
  if (d.repetition_penalty) s->repetition_penalty = static_cast<float>(*d.repetition_penalty);
  if (d.top_k) s->top_k = static_cast<int32_t>(*d.top_k);
  for (auto [key, out] : {std::pair{"temperature", &s->temperature}, std::pair{"top_p", &s->top_p},
                          std::pair{"min_p", &s->min_p}, std::pair{"presence_penalty", &s->presence_penalty},
                          std::pair{"frequency_penalty", &s->frequency_penalty},
                          std::pair{"repetition_penalty", &s->repetition_penalty}}) {
    std::optional<double> v;
    if (auto e = get_double(j, key, &v)) return e;
    if (v) *out = static_cast<float>(*v);
  }
  std::optional<int32_t> top_k;
  if (auto e = get_int32(j, "top_k", "must be -1 (disabled) or a positive integer", &top_k)) return e;
  if (top_k) s->top_k = *top_k;
  return std::nullopt;
}

// n, seed, ignore_eos, priority.
Error parse_choices_seed_priority(const json& j, const Limits& limits, CommonFields* c) {
  std::optional<int64_t> i;
  if (auto e = get_int(j, "n", &i)) return e;
  if (i) {
    if (*i < 1 || *i > limits.max_n)
      return invalid_param("n", fmt::format("must be between 1 and {}, got {}", limits.max_n, *i));
    c->n = static_cast<int>(*i);
  }
  i.reset();
  if (auto e = get_int(j, "seed", &i)) return e;
  if (i) c->sampling.seed = static_cast<uint64_t>(*i);
  if (auto e = get_bool(j, "ignore_eos", &c->sampling.ignore_eos)) return e;
  std::optional<int32_t> priority;
  if (auto e = get_int32(j, "priority", "must fit in 32 bits", &priority)) return e;
  if (priority) c->priority = *priority;
  return std::nullopt;
}

// vLLM's vllm_xargs: an object whose values are strings, numbers or lists of them.
Error parse_extra_args(const json& j, sampling::SamplingParams* s) {
  const json* x = field(j, "vllm_xargs");
  if (!x) return std::nullopt;
  if (!x->is_object()) return invalid_param("vllm_xargs", "must be an object");
  auto scalar = [](const json& v) { return v.is_string() || v.is_number(); };
  for (const auto& [key, v] : x->items()) {
    bool ok = scalar(v);
    if (v.is_array()) {
      ok = true;
      for (const auto& item : v) ok = ok && scalar(item);
    }
    if (!ok)
      return invalid_param("vllm_xargs", fmt::format("value of '{}' must be a string, a number or a list of them", key));
  }
  s->extra_args = x->dump();
  return std::nullopt;
}

// stop (a string or a list of them) and stop_token_ids.
Error parse_stops(const json& j, const Limits& limits, sampling::SamplingParams* s) {
  if (const json* st = field(j, "stop")) {
    s->stop.clear();
    if (st->is_string()) {
      s->stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      if (st->size() > limits.max_stop_strings)
        return invalid_param("stop", fmt::format("at most {} stop strings are allowed, got {}",
                                                 limits.max_stop_strings, st->size()));
      for (const auto& x : *st) {
        if (!x.is_string()) return invalid_param("stop", "must be a string or a list of strings");
        s->stop.push_back(x.get<std::string>());
      }
    } else {
      return invalid_param("stop", "must be a string or a list of strings");
    }
    for (const auto& x : s->stop) {
      if (x.size() > limits.max_stop_string_bytes)
        return invalid_param("stop", fmt::format("a stop string is longer than {} bytes", limits.max_stop_string_bytes));
    }
  }
  if (const json* st = field(j, "stop_token_ids")) {
    if (!st->is_array()) return invalid_param("stop_token_ids", "must be a list of token ids");
    if (st->size() > limits.max_stop_token_ids)
      return invalid_param("stop_token_ids", fmt::format("at most {} ids are allowed", limits.max_stop_token_ids));
    if (auto e = parse_token_list(*st, "stop_token_ids", &s->stop_token_ids)) return e;
  }
  return std::nullopt;
}

// OpenAI's logit_bias: token ids (as strings: JSON keys) to biases; vLLM clamps them to [-100, 100].
Error parse_logit_bias(const json& j, sampling::SamplingParams* s) {
  const json* lb = field(j, "logit_bias");
  if (!lb) return std::nullopt;
  if (!lb->is_object()) return invalid_param("logit_bias", "must be an object of token ids to biases");
  for (const auto& [key, v] : lb->items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
      return invalid_param("logit_bias", fmt::format("keys must be token ids, got '{}'", key));
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return invalid_param("logit_bias", fmt::format("the bias of token {} must be a number", id));
    s->logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(std::clamp(v.get<double>(), -100.0, 100.0)));
  }
  return std::nullopt;
}

// logit_bias, allowed_token_ids, min_tokens: which tokens may be sampled, and when.
Error parse_token_constraints(const json& j, sampling::SamplingParams* s) {
  if (auto e = parse_logit_bias(j, s)) return e;
  if (const json* at = field(j, "allowed_token_ids")) {
    if (!at->is_array() || at->empty()) return invalid_param("allowed_token_ids", "must be a non-empty list of token ids");
    if (auto e = parse_token_list(*at, "allowed_token_ids", &s->allowed_token_ids)) return e;
  }
  std::optional<int32_t> min_tokens;
  if (auto e = get_int32(j, "min_tokens", "must be a non-negative integer", &min_tokens)) return e;
  if (min_tokens) s->min_tokens = *min_tokens;
  return std::nullopt;
}

// Completions' logprobs: a count (-1 is the engine's "none"); its bound is
// SamplingParams::kMaxLogprobs, at admission. Chat's are logprobs and top_logprobs.
Error parse_completion_logprobs(const json& j, sampling::SamplingParams* s) {
  std::optional<int64_t> i;
  if (auto e = get_int(j, "logprobs", &i)) return e;
  if (i && *i < 0) return invalid_param("logprobs", fmt::format("must be a non-negative integer, got {}", *i));
  if (i) s->logprobs = static_cast<int32_t>(std::min<int64_t>(*i, INT32_MAX));
  return std::nullopt;
}

}  // namespace

Error parse_common(const json& j, const Limits& limits, bool chat, CommonFields* c) {
  if (auto e = refuse_unimplemented(j, chat)) return e;
  if (auto e = parse_structured_output(j, &c->sampling)) return e;
  if (auto e = parse_output_options(j, c)) return e;
  if (auto e = parse_bad_words(j, limits, c)) return e;
  if (auto e = parse_stream_options(j, c)) return e;
  if (auto e = parse_request_id(j, limits, c)) return e;
  if (chat) {
    // Its type only: its meaning (false: at most one call under tool_choice "required" or a
    // named function) is parse_tools' (tools.cpp).
    bool parallel = true;
    if (auto e = get_bool(j, "parallel_tool_calls", &parallel)) return e;
  }
  if (auto e = parse_max_tokens(j, chat, c)) return e;
  if (auto e = parse_sampling_numbers(j, limits.sampling_defaults, &c->sampling)) return e;
  if (auto e = parse_choices_seed_priority(j, limits, c)) return e;
  if (auto e = parse_extra_args(j, &c->sampling)) return e;
  if (auto e = parse_stops(j, limits, &c->sampling)) return e;
  if (auto e = parse_token_constraints(j, &c->sampling)) return e;
  if (!chat) return parse_completion_logprobs(j, &c->sampling);
  return std::nullopt;
}

}  // namespace troupe::openai::body
