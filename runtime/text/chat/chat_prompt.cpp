#include "runtime/text/chat/chat_prompt.hpp"

namespace troupe::chat {

using ojson = nlohmann::ordered_json;

Result<std::string> message_text(const ojson& content) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return invalid_argument("'content' must be a string or a list of content parts");
  std::string text;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      return invalid_argument("only content parts of type 'text' are supported");
    if (!first) text += "\n";
    first = false;
    text += part["text"].get<std::string>();
  }
  return text;
}

Result<ojson> template_message(const ojson& m) {
  if (!m.is_object()) return invalid_argument("each message must be an object");
  if (!m.contains("role") || !m["role"].is_string()) return invalid_argument("each message needs a string 'role'");
  const std::string role = m["role"];
  auto text = message_text(m.contains("content") ? m["content"] : ojson());
  if (!text.ok()) return text.status();
  ojson out = ojson::object();
  out["role"] = role;
  out["content"] = *text;
  if (role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (!m["tool_calls"].is_array()) return invalid_argument("'tool_calls' must be a list");
    ojson calls = ojson::array();
    for (const auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
          !call["function"].contains("name") || !call["function"]["name"].is_string())
        return invalid_argument("each tool call needs a 'function' with a string 'name'");
      ojson c = call;
      ojson& args = c["function"]["arguments"];
      // vLLM hands templates the arguments as an object (parsed from the JSON string clients send).
      if (args.is_null() || (args.is_string() && args.get<std::string>().empty())) {
        args = ojson::object();
      } else if (args.is_string()) {
        ojson parsed = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded())
          return invalid_argument("tool call '" + call["function"]["name"].get<std::string>() +
                                  "': 'arguments' is not valid JSON");
        args = std::move(parsed);
      }
      calls.push_back(std::move(c));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (role == "tool" && m.contains("tool_call_id")) out["tool_call_id"] = m["tool_call_id"];
  if (m.contains("name") && m["name"].is_string()) out["name"] = m["name"];
  for (const char* key : {"reasoning_content", "reasoning"})
    if (role == "assistant" && m.contains(key) && m[key].is_string()) out[key] = m[key];
  return out;
}

Result<ojson> template_tools(const ojson& tools) {
  if (tools.is_null()) return ojson();
  if (!tools.is_array()) return invalid_argument("'tools' must be a list");
  ojson out = ojson::array();
  for (const auto& t : tools) {
    if (!t.is_object() || t.value("type", "function") != "function" || !t.contains("function") ||
        !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string())
      return invalid_argument("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    const ojson& f = t["function"];
    ojson fn = ojson::object();
    fn["name"] = f["name"];
    fn["description"] = f.contains("description") ? f["description"] : ojson();
    fn["parameters"] = f.contains("parameters") ? f["parameters"] : ojson();
    ojson tool = ojson::object();
    tool["type"] = "function";
    tool["function"] = std::move(fn);
    out.push_back(std::move(tool));
  }
  return out;
}

Result<std::string> render_chat_prompt(const ChatPromptSource& source, const ChatPromptRequest& request) {
  if (request.continue_final_message && request.add_generation_prompt)
    return invalid_argument("continue_final_message and add_generation_prompt cannot both be true");
  const ModelChatTemplate* jinja = source.jinja ? &*source.jinja : nullptr;
  std::optional<ModelChatTemplate> per_request;
  if (!request.chat_template.empty()) {
    auto compiled = compile_chat_template(request.chat_template);
    if (!compiled.ok()) return invalid_argument("chat_template: " + compiled.status().message());
    per_request = std::move(compiled).value();
    jinja = &*per_request;
  }
  if (jinja) {
    ChatTemplateInput in;
    in.messages = request.messages;
    in.tools = request.tools;
    in.kwargs = request.kwargs;
    in.add_generation_prompt = request.add_generation_prompt;
    in.continue_final_message = request.continue_final_message;
    in.bos_token = source.bos_text;
    in.eos_token = source.eos_text;
    return render_chat_template(*jinja, in);
  }
  if (!source.builtin) return invalid_argument(source.error);
  std::vector<Message> messages;
  for (const auto& m : request.messages) {
    auto text = message_text(m.contains("content") ? m["content"] : ojson());
    if (!text.ok()) return text.status();
    messages.push_back({m.value("role", ""), *text});
  }
  auto rendered = apply(*source.builtin, messages, request.add_generation_prompt, source.bos_text, source.eos_text);
  if (!rendered.ok() || !request.continue_final_message) return rendered;
  return continue_final_message(*rendered, messages);
}

}  // namespace troupe::chat
