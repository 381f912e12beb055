#include "runtime/text/chat/chat_template.hpp"

#include <ctime>

#include <fmt/format.h>

#include <initializer_list>

namespace troupe::chat {

namespace {

const char* kSmolLmSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

std::string names_list() { return fmt::format("{}", fmt::join(known_names(), ", ")); }

// Pieces appended in order (also sidesteps GCC 12's -Wrestrict false positive on literal + string).
void append(std::string* out, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) out->append(p);
}
std::string concat(std::initializer_list<std::string_view> parts) {
  std::string s;
  append(&s, parts);
  return s;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Jinja's trim / Python's strip: ASCII whitespace on both ends.
std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return {};
  const size_t b = s.find_last_not_of(ws);
  return s.substr(a, b - a + 1);
}

// A chatml template's literal default system prompt, e.g.
// '<|im_start|>system\nYou are ...<|im_end|>\n' (newline written raw or as \n).
std::string chatml_default_system(std::string_view jinja) {
  const std::string_view head = "<|im_start|>system";
  for (size_t pos = jinja.find(head); pos != std::string_view::npos; pos = jinja.find(head, pos + 1)) {
    size_t start = pos + head.size();
    if (jinja.substr(start, 1) == "\n") {
      start += 1;
    } else if (jinja.substr(start, 2) == "\\n") {
      start += 2;
    } else {
      continue;
    }
    const size_t end = jinja.find("<|im_end|>", start);
    if (end == std::string_view::npos) break;
    const std::string_view text = jinja.substr(start, end - start);
    if (!text.empty() && text.find_first_of("'\"{}+") == std::string_view::npos) return std::string(text);
  }
  return {};
}

Status check_roles(const ChatTemplate& t, const std::vector<Message>& messages) {
  if (messages.empty()) return invalid_argument("chat: the conversation has no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    const bool ok = r == "system" || r == "user" || r == "assistant" || (t.family == Family::chatml && r == "tool");
    if (!ok) {
      return invalid_argument(fmt::format("chat: message {} has role '{}'; template '{}' accepts {}", i, r, t.name,
                                          t.family == Family::chatml ? "system, user, assistant, tool"
                                                                     : "system, user, assistant"));
    }
  }
  return {};
}

// Families whose templates require system? then user/assistant alternating from user.
Status check_alternation(const ChatTemplate& t, const std::vector<Message>& messages, size_t first) {
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& want = ((i - first) % 2 == 0) ? "user" : "assistant";
    if (messages[i].role != want) {
      return invalid_argument(fmt::format(
          "chat: template '{}' needs an optional leading system message, then user and assistant turns "
          "alternating from user; message {} is '{}'",
          t.name, i, messages[i].role));
    }
  }
  return {};
}

std::string render_chatml(const ChatTemplate& t, const std::vector<Message>& m, bool gen) {
  std::string out;
  if (!t.default_system.empty() && m.front().role != "system") {
    append(&out, {"<|im_start|>system\n", t.default_system, "<|im_end|>\n"});
  }
  for (const auto& msg : m) append(&out, {"<|im_start|>", msg.role, "\n", msg.content, "<|im_end|>\n"});
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama2(const std::vector<Message>& m, size_t first, const std::string& system,
                          const std::string& bos, const std::string& eos) {
  std::string out;
  for (size_t i = first; i < m.size(); ++i) {
    std::string content = m[i].content;
    if (i == first && !system.empty()) content = concat({"<<SYS>>\n", system, "\n<</SYS>>\n\n", content});
    if (m[i].role == "user") {
      append(&out, {bos, "[INST] ", trim(content), " [/INST]"});
    } else {
      append(&out, {" ", trim(content), " ", eos});
    }
  }
  return out;
}

std::string render_mistral(const std::vector<Message>& m, size_t first, const std::string& system,
                           const std::string& bos, const std::string& eos) {
  std::string out = bos;
  for (size_t i = first; i < m.size(); ++i) {
    std::string content = m[i].content;
    if (i == first && !system.empty()) content = concat({system, "\n\n", content});
    if (m[i].role == "user") {
      append(&out, {"[INST] ", content, " [/INST]"});
    } else {
      append(&out, {content, eos});
    }
  }
  return out;
}

// "26 Jul 2024": strftime("%d %b %Y") of the local date, as Python's datetime.now() gives it.
std::string today_date() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%d %b %Y", &local);
  return buf;
}

std::string render_llama3(const ChatTemplate& t, const std::vector<Message>& all, bool gen, const std::string& bos) {
  std::string out = bos;
  std::vector<Message> m = all;
  if (t.llama3_dates != Llama3Dates::none) {
    // Llama 3.1+: the system turn is always there, the user's system text after the dates.
    std::string system;
    if (!m.empty() && m.front().role == "system") {
      system = trim(m.front().content);
      m.erase(m.begin());
    }
    const std::string date = t.llama3_dates == Llama3Dates::today ? today_date() : "26 Jul 2024";
    append(&out, {"<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ",
                  date, "\n\n", system, "<|eot_id|>"});
  }
  for (const auto& msg : m) {
    append(&out, {"<|start_header_id|>", msg.role, "<|end_header_id|>\n\n", trim(msg.content), "<|eot_id|>"});
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_zephyr(const std::vector<Message>& m, bool gen, const std::string& eos) {
  std::string out;
  for (const auto& msg : m) append(&out, {"<|", msg.role, "|>\n", msg.content, eos, "\n"});
  if (gen) out += "<|assistant|>\n";
  return out;
}

std::string render_phi3(const std::vector<Message>& m, bool gen, const std::string& eos) {
  std::string out;
  for (const auto& msg : m) append(&out, {"<|", msg.role, "|>\n", msg.content, "<|end|>\n"});
  out += gen ? "<|assistant|>\n" : eos;
  return out;
}

std::string render_gemma(const std::vector<Message>& m, size_t first, const std::string& system, bool gen,
                         const std::string& bos) {
  std::string out = bos;
  for (size_t i = first; i < m.size(); ++i) {
    std::string content = m[i].content;
    if (i == first && !system.empty()) content = concat({system, "\n\n", content});
    const std::string role = m[i].role == "assistant" ? "model" : m[i].role;
    append(&out, {"<start_of_turn>", role, "\n", trim(content), "<end_of_turn>\n"});
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

std::vector<std::string> known_names() {
  return {"chatml", "smollm2", "llama2", "llama3", "llama3.1", "llama3.2", "mistral", "zephyr", "phi3", "gemma"};
}

Result<ChatTemplate> by_name(std::string_view name) {
  if (name == "chatml") return ChatTemplate{"chatml", Family::chatml, ""};
  if (name == "smollm2") return ChatTemplate{"smollm2", Family::chatml, kSmolLmSystem};
  if (name == "llama2") return ChatTemplate{"llama2", Family::llama2, ""};
  if (name == "llama3") return ChatTemplate{"llama3", Family::llama3, ""};
  if (name == "llama3.1") return ChatTemplate{"llama3.1", Family::llama3, "", Llama3Dates::fixed};
  if (name == "llama3.2") return ChatTemplate{"llama3.2", Family::llama3, "", Llama3Dates::today};
  if (name == "mistral" || name == "mistral-instruct") return ChatTemplate{"mistral", Family::mistral, ""};
  if (name == "zephyr") return ChatTemplate{"zephyr", Family::zephyr, ""};
  if (name == "phi3") return ChatTemplate{"phi3", Family::phi3, ""};
  if (name == "gemma") return ChatTemplate{"gemma", Family::gemma, ""};
  return invalid_argument(fmt::format("unknown chat template '{}'; known: {}", name, names_list()));
}

Result<ChatTemplate> detect(std::string_view jinja) {
  if (contains(jinja, "<|im_start|>")) {
    ChatTemplate t{"chatml", Family::chatml, chatml_default_system(jinja)};
    if (t.default_system == kSmolLmSystem) t.name = "smollm2";
    return t;
  }
  if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|eot_id|>")) {
    if (!contains(jinja, "Cutting Knowledge Date")) return *by_name("llama3");
    return *by_name(contains(jinja, "strftime_now") ? "llama3.2" : "llama3.1");
  }
  if (contains(jinja, "<start_of_turn>")) return *by_name("gemma");
  if (contains(jinja, "[INST]")) return *by_name(contains(jinja, "<<SYS>>") ? "llama2" : "mistral");
  if (contains(jinja, "<|assistant|>") && contains(jinja, "<|end|>")) return *by_name("phi3");
  if (contains(jinja, "<|assistant|>") && contains(jinja, "<|user|>")) return *by_name("zephyr");
  return invalid_argument(fmt::format(
      "unrecognised chat template{}; pass --chat-template NAME with one of: {}",
      jinja.empty() ? " (the model has none)" : "", names_list()));
}

Result<std::string> apply(const ChatTemplate& tmpl, const std::vector<Message>& messages, bool add_generation_prompt,
                          const std::string& bos_text, const std::string& eos_text) {
  TROUPE_RETURN_IF_ERROR(check_roles(tmpl, messages));
  const auto& m = messages;
  // Families without a system turn of their own fold a leading one into the first user turn.
  const bool folds_system = tmpl.family == Family::llama2 || tmpl.family == Family::mistral ||
                            tmpl.family == Family::gemma;
  size_t first = 0;
  std::string system;
  if (folds_system) {
    if (m.front().role == "system") {
      system = m.front().content;
      first = 1;
    }
    if (first == m.size()) {
      return invalid_argument(fmt::format("chat: template '{}' needs a user message after the system message",
                                          tmpl.name));
    }
    TROUPE_RETURN_IF_ERROR(check_alternation(tmpl, m, first));
  }
  switch (tmpl.family) {
    case Family::chatml: return render_chatml(tmpl, m, add_generation_prompt);
    case Family::llama2: return render_llama2(m, first, system, bos_text, eos_text);
    case Family::mistral: return render_mistral(m, first, system, bos_text, eos_text);
    case Family::llama3: return render_llama3(tmpl, m, add_generation_prompt, bos_text);
    case Family::zephyr: return render_zephyr(m, add_generation_prompt, eos_text);
    case Family::phi3: return render_phi3(m, add_generation_prompt, eos_text);
    case Family::gemma: return render_gemma(m, first, system, add_generation_prompt, bos_text);
  }
  return internal_error("chat: unhandled template family");
}

Result<std::string> continue_final_message(const std::string& rendered, const std::vector<Message>& messages) {
  if (messages.empty() || messages.back().role != "assistant")
    return invalid_argument("chat: continue_final_message needs the conversation to end with an assistant message");
  const std::string content = trim(messages.back().content);
  if (content.empty()) return invalid_argument("chat: continue_final_message needs a non-empty final message");
  const size_t at = rendered.rfind(content);
  if (at == std::string::npos)
    return invalid_argument("chat: the final message is not in the rendered prompt; it cannot be continued");
  // transformers keeps the content's trailing whitespace when the template kept it.
  const std::string& final = messages.back().content;
  const size_t lead = final.find(content);  // = the leading whitespace's length
  const size_t lstripped = final.size() - lead;
  if (rendered.compare(at, lstripped, final) == 0) return rendered.substr(0, at + lstripped);
  return rendered.substr(0, at + content.size());
}

}  // namespace troupe::chat
