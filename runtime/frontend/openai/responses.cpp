#include "runtime/frontend/openai/responses.hpp"

#include <random>

#include <fmt/format.h>

#include "troupe/log.hpp"

namespace troupe::openai {
namespace {

using json = nlohmann::json;
using Error = std::optional<ApiError>;

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError not_implemented(const std::string& key, const std::string& why) {
  return invalid_param(key, fmt::format("{} is not implemented in troupe's /v1/responses yet{}", key, why));
}

// A message's content: a string, or a list of text parts (input_text, output_text, text).
Error content_text(const json& content, const std::string& where, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return invalid_param("input", where + ".content must be a string or a list of parts");
  out->clear();
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string())
      return invalid_param("input", fmt::format("{}.content[{}] must be an object with a string 'type'", where, i));
    const std::string t = type->get<std::string>();
    if (t != "input_text" && t != "output_text" && t != "text")
      return not_implemented("input", fmt::format(" for content parts of type '{}' ({}.content[{}]); text parts are",
                                                  t, where, i));
    const json* text = field(part, "text");
    if (!text || !text->is_string())
      return invalid_param("input", fmt::format("{}.content[{}].text must be a string", where, i));
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

// Input items as chat messages: messages (developer is system), function calls as the
// assistant's tool_calls (consecutive calls in one message), their outputs as tool
// messages. Reasoning items of earlier answers are left out of the prompt (as chat
// leaves out reasoning_content).
Error input_messages(const json& input, json* messages) {
  if (input.is_string()) {
    messages->push_back({{"role", "user"}, {"content", input}});
    return std::nullopt;
  }
  if (!input.is_array()) return invalid_param("input", "must be a string or a list of input items");
  if (input.empty()) return invalid_param("input", "must not be empty");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!item.is_object()) return invalid_param("input", where + " must be an object");
    std::string type = "message";
    if (const json* t = field(item, "type")) {
      if (!t->is_string()) return invalid_param("input", where + ".type must be a string");
      type = t->get<std::string>();
    }
    if (type == "message") {
      const json* role = field(item, "role");
      if (!role || !role->is_string()) return invalid_param("input", where + ".role must be a string");
      std::string r = role->get<std::string>();
      if (r == "developer") r = "system";
      if (r != "user" && r != "system" && r != "assistant")
        return invalid_param("input", fmt::format("{}.role must be user, system, developer or assistant, got '{}'",
                                                  where, role->get<std::string>()));
      const json* content = field(item, "content");
      if (!content) return invalid_param("input", where + ".content is required");
      std::string text;
      if (auto e = content_text(*content, where, &text)) return e;
      messages->push_back({{"role", r}, {"content", text}});
    } else if (type == "function_call") {
      const json* call_id = field(item, "call_id");
      const json* name = field(item, "name");
      const json* arguments = field(item, "arguments");
      if (!call_id || !call_id->is_string() || !name || !name->is_string() || !arguments || !arguments->is_string())
        return invalid_param("input", where + " (function_call) needs string call_id, name and arguments");
      json call = {{"id", *call_id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *arguments}}}};
      if (!messages->empty() && messages->back()["role"] == "assistant" && messages->back().contains("tool_calls"))
        messages->back()["tool_calls"].push_back(std::move(call));
      else
        messages->push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
    } else if (type == "function_call_output") {
      const json* call_id = field(item, "call_id");
      const json* output = field(item, "output");
      if (!call_id || !call_id->is_string() || !output)
        return invalid_param("input", where + " (function_call_output) needs a string call_id and an output");
      std::string text;
      if (auto e = content_text(*output, where, &text)) return e;
      messages->push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", text}});
    } else if (type == "reasoning") {
      continue;
    } else {
      return not_implemented("input", fmt::format(" for items of type '{}' ({}); message, function_call, "
                                                  "function_call_output and reasoning items are",
                                                  type, where));
    }
  }
  return std::nullopt;
}

// Function tools {type, name, description, parameters, strict} in chat's form.
Error chat_tools(const json& tools, json* out) {
  if (!tools.is_array()) return invalid_param("tools", "must be a list");
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const json* type = t.is_object() ? field(t, "type") : nullptr;
    if (!type || !type->is_string()) return invalid_param("tools", fmt::format("tools[{}] needs a string type", i));
    if (*type != "function")
      return not_implemented("tools", fmt::format(" for built-in tools (tools[{}] is '{}'); function tools are", i,
                                                  type->get<std::string>()));
    json function = json::object();
    for (const char* key : {"name", "description", "parameters", "strict"})
      if (const json* v = field(t, key)) function[key] = *v;
    out->push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return std::nullopt;
}

// tool_choice "none" | "auto" | "required" | {"type": "function", "name"}.
Error chat_tool_choice(const json& choice, json* out) {
  if (choice.is_string()) {
    *out = choice;
    return std::nullopt;
  }
  const json* type = choice.is_object() ? field(choice, "type") : nullptr;
  if (!type || !type->is_string()) return invalid_param("tool_choice", "must be a string or an object with a type");
  if (*type != "function")
    return not_implemented("tool_choice", fmt::format(" for '{}'; function choices are", type->get<std::string>()));
  const json* name = field(choice, "name");
  if (!name || !name->is_string()) return invalid_param("tool_choice", "a function choice needs a string name");
  *out = {{"type", "function"}, {"function", {{"name", *name}}}};
  return std::nullopt;
}

// The chat parser names chat's fields; a Responses client sent these.
ApiError renamed(ApiError e) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"max_tokens", "max_output_tokens"}, {"messages", "input"}, {"response_format", "text"}};
  for (const auto& [chat, responses] : kNames) {
    if (e.param != chat) continue;
    e.param = responses;
    if (e.message.rfind(chat, 0) == 0) e.message = responses + e.message.substr(std::string(chat).size());
  }
  return e;
}

}  // namespace

std::optional<ApiError> parse_responses_request(std::string_view body, const Limits& limits, ResponsesRequest* out) {
  if (json_depth(body, limits.max_json_depth + 1) > limits.max_json_depth)
    return invalid_json(fmt::format("nesting deeper than {} levels", limits.max_json_depth));
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_json("could not parse the request body (or it is not UTF-8)");
  if (!j.is_object()) return invalid_json("the request body must be a JSON object");
  *out = ResponsesRequest{};

  // Not implemented: refused by name unless at their defaults.
  if (const json* v = field(j, "store"); v && *v != false)
    return not_implemented("store", " (responses are not stored); send store: false or leave it out");
  if (field(j, "previous_response_id"))
    return not_implemented("previous_response_id", " (responses are not stored); send the conversation as input");
  if (field(j, "conversation")) return not_implemented("conversation", " (responses are not stored)");
  if (const json* v = field(j, "background"); v && *v != false) return not_implemented("background", "");
  if (const json* v = field(j, "include"); v && !(v->is_array() && v->empty()))
    return not_implemented("include", "");
  if (field(j, "prompt")) return not_implemented("prompt", " (prompt templates)");
  if (field(j, "reasoning")) return not_implemented("reasoning", " (reasoning effort and summaries)");
  if (field(j, "max_tool_calls")) return not_implemented("max_tool_calls", "");
  if (field(j, "previous_input_messages")) return not_implemented("previous_input_messages", "");
  if (const json* v = field(j, "enable_response_messages"); v && *v != false)
    return not_implemented("enable_response_messages", "");
  if (const json* v = field(j, "truncation"); v && *v != "disabled")
    return not_implemented("truncation", "; only \"disabled\" is accepted");
  if (const json* v = field(j, "top_logprobs"); v && !(v->is_number_integer() && v->get<int64_t>() == 0))
    return not_implemented("top_logprobs", "");
  if (const json* v = field(j, "stream_options"))
    if (!v->is_object() || (field(*v, "include_obfuscation") && (*v)["include_obfuscation"] != false))
      return not_implemented("stream_options", " (obfuscation); leave it out");
  if (const json* v = field(j, "service_tier"); v && *v != "auto" && *v != "default")
    return not_implemented("service_tier", "; only \"auto\" and \"default\" are accepted");
  if (field(j, "logit_bias")) return not_implemented("logit_bias", " on /v1/responses");

  json chat = json::object();
  json messages = json::array();
  if (const json* instructions = field(j, "instructions")) {
    if (!instructions->is_string()) return invalid_param("instructions", "must be a string");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const json* input = field(j, "input");
  if (!input) return invalid_param("input", "is required");
  if (auto e = input_messages(*input, &messages)) return e;
  chat["messages"] = std::move(messages);
  if (const json* v = field(j, "max_output_tokens")) chat["max_tokens"] = *v;
  for (const char* key : {"model", "temperature", "top_p", "top_k", "stream", "user", "parallel_tool_calls",
                          "priority", "cache_salt", "chat_template_kwargs"})
    if (const json* v = field(j, key)) chat[key] = *v;
  if (const json* tools = field(j, "tools")) {
    json converted = json::array();
    if (auto e = chat_tools(*tools, &converted)) return e;
    if (!converted.empty()) chat["tools"] = std::move(converted);
  }
  if (const json* choice = field(j, "tool_choice")) {
    json converted;
    if (auto e = chat_tool_choice(*choice, &converted)) return e;
    // Without tools a choice of "auto" or "none" means nothing (Responses' default is "auto").
    if (chat.contains("tools") || (converted != "auto" && converted != "none")) chat["tool_choice"] = converted;
  }
  if (const json* text = field(j, "text")) {
    const json* format = text->is_object() ? field(*text, "format") : nullptr;
    if (format) {
      const json* type = format->is_object() ? field(*format, "type") : nullptr;
      if (!type || !type->is_string()) return invalid_param("text", "text.format needs a string type");
      if (*type == "json_schema") {
        json js = {{"name", format->value("name", "response")}};
        if (const json* schema = field(*format, "schema")) {
          // As JSON text with its keys in their written order (the engine writes properties so).
          const auto ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
          const nlohmann::ordered_json::json_pointer at("/text/format/schema");
          js["schema"] = ordered.is_object() && ordered.contains(at) ? ordered.at(at).dump() : schema->dump();
        }
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
      } else if (*type == "json_object") {
        chat["response_format"] = {{"type", "json_object"}};
      } else if (*type != "text") {
        return not_implemented("text", fmt::format(" for format '{}'", type->get<std::string>()));
      }
    }
  }
  if (const json* id = field(j, "request_id")) {
    if (!id->is_string() || id->get<std::string>().empty() || id->get<std::string>().size() > limits.max_request_id_bytes)
      return invalid_param("request_id", fmt::format("must be a non-empty string of at most {} bytes",
                                                     limits.max_request_id_bytes));
    for (unsigned char ch : id->get<std::string>())
      if (ch < 0x21 || ch > 0x7e) return invalid_param("request_id", "must be printable ASCII without spaces");
    out->request_id = id->get<std::string>();
  }
  if (auto e = parse_chat_request(chat.dump(), limits, &out->chat)) return renamed(*e);
  // Admission names the engine's fields; this body's names for them.
  out->chat.common.body_names.emplace_back("max_tokens", "max_output_tokens");

  // What the response object repeats, at OpenAI's defaults when not sent.
  json& echo = out->echo;
  echo["instructions"] = j.value("instructions", json(nullptr));
  echo["max_output_tokens"] = j.value("max_output_tokens", json(nullptr));
  echo["metadata"] = j.value("metadata", json::object());
  echo["parallel_tool_calls"] = j.value("parallel_tool_calls", json(true));
  echo["temperature"] = j.value("temperature", json(1.0));
  echo["top_p"] = j.value("top_p", json(1.0));
  echo["tool_choice"] = j.value("tool_choice", json("auto"));
  echo["tools"] = j.value("tools", json::array());
  echo["text"] = j.value("text", json{{"format", {{"type", "text"}}}});
  echo["user"] = j.value("user", json(nullptr));
  if (echo["metadata"].is_null()) echo["metadata"] = json::object();
  if (echo["tools"].is_null()) echo["tools"] = json::array();
  if (echo["tool_choice"].is_null()) echo["tool_choice"] = "auto";
  if (echo["parallel_tool_calls"].is_null()) echo["parallel_tool_calls"] = true;
  if (echo["temperature"].is_null()) echo["temperature"] = 1.0;
  if (echo["top_p"].is_null()) echo["top_p"] = 1.0;
  if (echo["text"].is_null()) echo["text"] = {{"format", {{"type", "text"}}}};
  return std::nullopt;
}

std::string make_response_item_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}_{:016x}{:016x}", prefix, rng(), rng());
}

json response_output_items(const Choice& answer) {
  json items = json::array();
  const bool reasoning = answer.has_reasoning && answer.reasoning;
  if (reasoning)
    items.push_back({{"id", make_response_item_id("rs")},
                     {"type", "reasoning"},
                     {"summary", json::array()},
                     {"content", json::array({{{"type", "reasoning_text"}, {"text", *answer.reasoning}}})},
                     {"encrypted_content", nullptr},
                     {"status", "completed"}});
  if (!answer.text.empty() || (answer.tool_calls.empty() && !reasoning))
    items.push_back(
        {{"id", make_response_item_id("msg")},
         {"type", "message"},
         {"role", "assistant"},
         {"status", "completed"},
         {"content",
          json::array({{{"type", "output_text"}, {"text", answer.text}, {"annotations", json::array()}, {"logprobs", json::array()}}})}});
  for (const auto& call : answer.tool_calls)
    items.push_back({{"id", make_response_item_id("fc")},
                     {"type", "function_call"},
                     {"call_id", call.id},
                     {"name", call.name},
                     {"arguments", call.arguments},
                     {"status", "completed"}});
  return items;
}

std::string response_status(const std::optional<std::string>& finish_reason) {
  return finish_reason && *finish_reason == "length" ? "incomplete" : "completed";
}

json response_object(const std::string& id, int64_t created_at, const std::string& model, const json& echo,
                     const std::string& status, json output, const std::optional<ResponseUsage>& usage) {
  json r = {{"id", id},
            {"object", "response"},
            {"created_at", created_at},
            {"status", status},
            {"background", false},
            {"error", nullptr},
            {"incomplete_details",
             status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
            {"model", model},
            {"output", std::move(output)},
            {"previous_response_id", nullptr},
            {"reasoning", nullptr},
            {"service_tier", "auto"},
            {"store", false},
            {"truncation", "disabled"}};
  for (auto it = echo.begin(); it != echo.end(); ++it) r[it.key()] = it.value();
  // No input_tokens_details: the engine does not report prefix-cache hits per request.
  if (usage)
    r["usage"] = {{"input_tokens", usage->input_tokens},
                  {"output_tokens", usage->output_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", usage->reasoning_tokens}}},
                  {"total_tokens", usage->input_tokens + usage->output_tokens}};
  else
    r["usage"] = nullptr;
  return r;
}

}  // namespace troupe::openai
