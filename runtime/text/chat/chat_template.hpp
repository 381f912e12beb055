// Chat templates: render a conversation into the prompt text a model was
// trained on. The GGUF's Jinja template (tokenizer.chat_template) is not
// executed; it is recognised by distinctive substrings and the family is
// rendered by hand, byte-exact with the real template's output.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::chat {

struct Message {
  std::string role;  // "system" | "user" | "assistant" (chatml also takes "tool")
  std::string content;
};

enum class Family { chatml, llama2, llama3, mistral, zephyr, phi3, gemma };

/// Llama 3.1+'s system header: always written, with "Cutting Knowledge Date: December 2023"
/// and "Today Date: D". 3.1's template fixes D to "26 Jul 2024"; 3.2's takes today's date
/// (strftime_now("%d %b %Y"), as transformers and llama.cpp render it).
enum class Llama3Dates { none, fixed, today };

struct ChatTemplate {
  std::string name;            // one of known_names()
  Family family = Family::chatml;
  std::string default_system;  // chatml: system turn added when the conversation has none
  Llama3Dates llama3_dates = Llama3Dates::none;
};

/// Recognise a Jinja chat template; an unknown one is invalid_argument naming how to pick one.
Result<ChatTemplate> detect(std::string_view jinja);
/// "chatml", "smollm2" (chatml + SmolLM2's default system prompt), "llama2", "llama3",
/// "llama3.1", "llama3.2" (Llama3Dates), "mistral" (alias "mistral-instruct"), "zephyr",
/// "phi3", "gemma". Qwen2/2.5/3 files are chatml (Qwen2.5's default system prompt is read
/// from its template).
Result<ChatTemplate> by_name(std::string_view name);
std::vector<std::string> known_names();

/// Render `messages`. bos_text/eos_text are the tokenizer's BOS/EOS texts, written where
/// the real template writes bos_token/eos_token (pass "" to leave BOS to the tokenizer).
/// Tokenize the result with parse_special=true. Roles are validated; families whose
/// templates reject a system turn or non-alternating turns (llama2, mistral, gemma) fold
/// a leading system message into the first user turn and reject bad ordering.
Result<std::string> apply(const ChatTemplate& tmpl, const std::vector<Message>& messages,
                          bool add_generation_prompt, const std::string& bos_text, const std::string& eos_text);

/// vLLM's continue_final_message (as transformers does it): `rendered`, the conversation
/// rendered without a generation prompt, cut right after the final message's content
/// (whitespace-trimmed), so that the model continues that message instead of starting a
/// new one. The final message must be the assistant's and non-empty.
Result<std::string> continue_final_message(const std::string& rendered, const std::vector<Message>& messages);

}  // namespace troupe::chat
