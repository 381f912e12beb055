// The model's own chat template (GGUF tokenizer.chat_template, tokenizer_config.json
// chat_template, --chat-template or a request's chat_template), rendered with the
// jinja engine as Hugging Face transformers renders it and as vLLM calls it.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/text/chat/jinja/template.hpp"
#include "troupe/status.hpp"

namespace troupe::chat {

struct ModelChatTemplate {
  std::string source;                                // the Jinja text
  std::shared_ptr<const jinja::Template> compiled;
};

/// What the template is rendered with. `messages` are in vLLM's form for templates:
/// {"role", "content" (a string, or a list of parts), "tool_calls" with arguments as
/// objects, "tool_call_id", "name"}; keys keep their order.
struct ChatTemplateInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;                      // null: no tools (the template sees none)
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::string bos_token;                             // the tokenizer's BOS/EOS texts, as HF passes them
  std::string eos_token;
  std::time_t now = 0;                               // strftime_now's time; 0: now
};

/// Compiles a template; a syntax error is invalid_argument naming the line.
Result<ModelChatTemplate> compile_chat_template(std::string_view source);

/// The template's text from tokenizer_config.json's "chat_template": a string, or a list
/// of {"name", "template"} from which "default" is taken. not_found when there is none.
Result<std::string> chat_template_from_tokenizer_config(const nlohmann::json& config);

/// --chat-template's value: a file's text when `value` names a readable file, else
/// `value` itself when it looks like a Jinja template ("{{" or "{%"); anything else
/// is invalid_argument (so a mistyped path does not become a template).
Result<std::string> read_chat_template_arg(const std::string& value);

/// Renders as transformers' apply_chat_template(tokenize=False): context = bos_token,
/// eos_token, then chat_template_kwargs, then messages, tools, documents (None) and
/// add_generation_prompt; continue_final_message cuts the text after the final
/// message's content. Errors are invalid_argument with the template's message.
Result<std::string> render_chat_template(const ModelChatTemplate& tmpl, const ChatTemplateInput& input);

}  // namespace troupe::chat
