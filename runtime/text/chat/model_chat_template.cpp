#include "runtime/text/chat/model_chat_template.hpp"

#include <fstream>
#include <sstream>

namespace troupe::chat {
namespace {

/// transformers' continue_final_message cut: keep the text up to the end of the final
/// message's content (its trailing whitespace too when the template kept it).
Result<std::string> cut_after_final_message(const std::string& rendered, const nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty()) return invalid_argument("continue_final_message needs messages");
  const auto& content = messages.back().contains("content") ? messages.back()["content"] : nlohmann::ordered_json();
  std::string final;
  if (content.is_string()) {
    final = content.get<std::string>();
  } else if (content.is_array()) {
    bool found = false;
    for (auto it = content.rbegin(); it != content.rend() && !found; ++it)
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) final = (*it)["text"], found = true;
    if (!found) return invalid_argument("continue_final_message is set but the final message has no text content");
  } else {
    return invalid_argument("continue_final_message is set but the final message has no content");
  }
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  size_t b = 0, e = final.size();
  while (b < e && space(final[b])) ++b;
  while (e > b && space(final[e - 1])) --e;
  const std::string stripped = final.substr(b, e - b);
  const std::string lstripped = final.substr(b);
  const size_t loc = rendered.rfind(stripped);
  if (loc == std::string::npos)
    return invalid_argument("continue_final_message is set but the final message does not appear in the chat after "
                            "applying the chat template");
  // The template kept the content's spacing: keep its trailing whitespace too.
  if (rendered.substr(loc, lstripped.size()) == final) return rendered.substr(0, loc + lstripped.size());
  return rendered.substr(0, loc + stripped.size());
}

bool looks_like_template(const std::string& s) {
  return s.find('{') != std::string::npos || s.find('}') != std::string::npos || s.find('\n') != std::string::npos;
}

/// vLLM decodes a template given inline with Python's escapes, so "\n" on a command line is a newline.
std::string decode_escapes(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    switch (s[++i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      default: out += '\\', out += s[i];
    }
  }
  return out;
}

}  // namespace

Result<ModelChatTemplate> compile_chat_template(std::string_view source) {
  auto t = jinja::Template::compile(source);
  if (!t.ok()) return t.status();
  ModelChatTemplate m;
  m.source = std::string(source);
  m.compiled = std::make_shared<const jinja::Template>(std::move(t).value());
  return m;
}

Result<std::string> chat_template_from_tokenizer_config(const nlohmann::json& config) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return not_found("tokenizer_config.json has no chat_template");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    return not_found("tokenizer_config.json's chat_template list has no template named 'default'");
  }
  return invalid_argument("tokenizer_config.json's chat_template must be a string or a list of {name, template}");
}

Result<std::string> read_chat_template_arg(const std::string& value) {
  std::ifstream in(value, std::ios::binary);
  if (in) {
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return invalid_argument("cannot read the chat template file " + value);
    return text.str();
  }
  if (looks_like_template(value)) return decode_escapes(value);
  return invalid_argument("--chat-template '" + value +
                          "' is neither a readable file nor a Jinja template (a template has '{{' or '{%')");
}

Result<std::string> render_chat_template(const ModelChatTemplate& tmpl, const ChatTemplateInput& input) {
  if (!tmpl.compiled) return invalid_argument("no chat template");
  if (input.continue_final_message && input.add_generation_prompt)
    return invalid_argument("continue_final_message and add_generation_prompt cannot both be true");
  if (!input.kwargs.is_object()) return invalid_argument("chat_template_kwargs must be an object");
  jinja::ValueDict ctx;
  ctx.set(jinja::Value("bos_token"), jinja::Value(input.bos_token));
  ctx.set(jinja::Value("eos_token"), jinja::Value(input.eos_token));
  for (const auto& [k, v] : input.kwargs.items()) {
    if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
      return invalid_argument("chat_template_kwargs may not set '" + k + "' (the request's own field sets it)");
    try {
      ctx.set(jinja::Value(k), jinja::from_json(v));
    } catch (const jinja::Error& e) {
      return invalid_argument(std::string("chat_template_kwargs: ") + e.what());
    }
  }
  try {
    ctx.set(jinja::Value("messages"), jinja::from_json(input.messages));
    ctx.set(jinja::Value("tools"), jinja::from_json(input.tools));
  } catch (const jinja::Error& e) {
    return invalid_argument(std::string("messages: ") + e.what());
  }
  ctx.set(jinja::Value("documents"), jinja::Value(jinja::None{}));
  ctx.set(jinja::Value("add_generation_prompt"), jinja::Value(input.add_generation_prompt));
  jinja::RenderOptions options;
  options.now = input.now;
  auto rendered = tmpl.compiled->render(jinja::Value(std::move(ctx)), options);
  if (!rendered.ok() || !input.continue_final_message) return rendered;
  return cut_after_final_message(*rendered, input.messages);
}

}  // namespace troupe::chat
