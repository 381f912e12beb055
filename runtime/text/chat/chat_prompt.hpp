// How a chat request becomes prompt text: the model's own Jinja template (or the
// one --chat-template set, or the request's chat_template), else a built-in family
// for files without a template. vLLM's order and semantics.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/text/chat/chat_template.hpp"
#include "runtime/text/chat/model_chat_template.hpp"
#include "troupe/status.hpp"

namespace troupe::chat {

/// A chat request as the template sees it (see ChatTemplateInput for the message form).
struct ChatPromptRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;                                      // null: none
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::string chat_template;  // a per-request Jinja template (vLLM's chat_template); "" = the model's
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

/// The model's chat template, chosen at start-up.
struct ChatPromptSource {
  std::optional<ModelChatTemplate> jinja;  // the model's or --chat-template's Jinja template
  std::optional<ChatTemplate> builtin;     // a built-in family: --chat-template NAME, or the fallback
  std::string error;                       // why there is neither
  std::string origin;                      // where the template came from, for logs ("GGUF tokenizer.chat_template", ...)
  std::string bos_text;                    // the tokenizer's BOS/EOS texts (bos_token/eos_token)
  std::string eos_text;
};

/// The prompt text. Errors are invalid_argument (HTTP 400) naming the problem: no
/// template, a request template that does not compile, the template's own
/// raise_exception, ...
Result<std::string> render_chat_prompt(const ChatPromptSource& source, const ChatPromptRequest& request);

/// A message's text content: a string, or its text parts joined with "\n" (vLLM's
/// string content format); other part types are invalid_argument.
Result<std::string> message_text(const nlohmann::ordered_json& content);

/// A client's message in the form templates see (vLLM's): role, content (text),
/// tool_calls with JSON-string arguments parsed to objects, tool_call_id, name.
Result<nlohmann::ordered_json> template_message(const nlohmann::ordered_json& message);

/// vLLM's tools for templates: [{"type", "function": {"name", "description", "parameters"}}]
/// (absent description/parameters are null, as pydantic's model_dump writes them).
Result<nlohmann::ordered_json> template_tools(const nlohmann::ordered_json& tools);

}  // namespace troupe::chat
