// Each family's rendering against the text its real Jinja template produces
// (written out by hand), detection from template text, and validation errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "runtime/text/chat/chat_template.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"

namespace troupe::chat {
namespace {

// SmolLM2-135M-Instruct's tokenizer.chat_template, as stored in its GGUF.
const char* kSmolLm2Jinja =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% "
    "endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% "
    "if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const std::vector<Message> kChat = {
    {"user", "Hello"}, {"assistant", "Hi there!"}, {"user", "How are you?"}};

std::string render(const std::string& name, const std::vector<Message>& m, bool gen = true,
                   const std::string& bos = "<s>", const std::string& eos = "</s>") {
  auto t = by_name(name);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  auto r = apply(*t, m, gen, bos, eos);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::string();
}

TEST(ChatTemplate, SmolLm2AddsDefaultSystem) {
  auto t = detect(kSmolLm2Jinja);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->name, "smollm2");
  EXPECT_EQ(t->family, Family::chatml);
  auto r = apply(*t, {{"user", "What is the capital of France?"}}, true, "", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // A given system message replaces the default one.
  auto r2 = apply(*t, {{"system", "Be brief."}, {"user", "Hi"}}, false, "", "");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(*r2, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, SmolLm2FromRealGguf) {
  const char* path = std::getenv("TROUPE_TEST_MODEL");
  if (!path || !std::filesystem::exists(path)) GTEST_SKIP() << "set TROUPE_TEST_MODEL to a SmolLM2 GGUF";
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const auto jinja = (*file)->get_string("tokenizer.chat_template");
  ASSERT_TRUE(jinja.has_value());
  auto t = detect(*jinja);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->family, Family::chatml);
  if ((*file)->get_string("tokenizer.ggml.pre").value_or("") == "smollm") {
    EXPECT_EQ(t->name, "smollm2");
  }
}

TEST(ChatTemplate, ChatMl) {
  EXPECT_EQ(render("chatml", kChat),
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there!<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n");
  // Qwen2.5-style default system prompt is read from the template text.
  const std::string qwen =
      "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- endif %}{%- if messages[0]['role'] == 'system' %}"
      "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}"
      "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
      "{%- endif %}";
  auto t = detect(qwen);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

// vLLM's continue_final_message: the prompt stops right after the final assistant
// message, in every family (llama3 trims the content, mistral has no end-of-turn text).
TEST(ChatTemplate, ContinueFinalMessageCutsAfterTheLastAssistantMessage) {
  const std::vector<Message> m = {{"user", "Tell a story"}, {"assistant", "Once upon a time "}};
  const std::pair<const char*, const char*> want[] = {
      // chatml and mistral keep the content as written, so its trailing space stays (transformers' cut);
      // llama3 and gemma trim it.
      {"chatml", "<|im_start|>user\nTell a story<|im_end|>\n<|im_start|>assistant\nOnce upon a time "},
      {"llama3", "<s><|start_header_id|>user<|end_header_id|>\n\nTell a story<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nOnce upon a time"},
      {"mistral", "<s>[INST] Tell a story [/INST]Once upon a time "},
      {"gemma", "<s><start_of_turn>user\nTell a story<end_of_turn>\n<start_of_turn>model\nOnce upon a time"},
  };
  for (const auto& [name, text] : want) {
    auto cut = continue_final_message(render(name, m, /*gen=*/false), m);
    ASSERT_TRUE(cut.ok()) << name << ": " << cut.status().to_string();
    EXPECT_EQ(*cut, text) << name;
  }
  // The content may also appear earlier: the last occurrence is the final message.
  const std::vector<Message> echo = {{"user", "Say ok"}, {"assistant", "ok"}, {"user", "again"}, {"assistant", "ok"}};
  auto cut = continue_final_message(render("chatml", echo, false), echo);
  ASSERT_TRUE(cut.ok());
  const std::string tail = "again<|im_end|>\n<|im_start|>assistant\nok";
  ASSERT_GE(cut->size(), tail.size());
  EXPECT_EQ(cut->substr(cut->size() - tail.size()), tail);
  EXPECT_FALSE(continue_final_message(render("chatml", kChat, false), kChat).ok());  // ends with a user turn
  const std::vector<Message> empty = {{"user", "x"}, {"assistant", "  "}};
  EXPECT_FALSE(continue_final_message(render("chatml", empty, false), empty).ok());
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(render("llama2", {{"system", "Be kind."}, {"user", " Hello "}, {"assistant", "Hi!"}, {"user", "Bye"}}),
            "<s>[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\n Hello [/INST] Hi! </s><s>[INST] Bye [/INST]");  // strip() only trims the ends
  EXPECT_EQ(render("llama2", kChat), "<s>[INST] Hello [/INST] Hi there! </s><s>[INST] How are you? [/INST]");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render("llama3", {{"system", "Be kind."}, {"user", "Hello\n"}}, true, "<|begin_of_text|>", ""),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe kind.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Mistral) {
  EXPECT_EQ(render("mistral", kChat), "<s>[INST] Hello [/INST]Hi there!</s>[INST] How are you? [/INST]");
  EXPECT_EQ(render("mistral-instruct", {{"system", "Sys"}, {"user", "Hi"}}), "<s>[INST] Sys\n\nHi [/INST]");
}

TEST(ChatTemplate, Zephyr) {
  EXPECT_EQ(render("zephyr", {{"system", "Be kind."}, {"user", "Hello"}}),
            "<|system|>\nBe kind.</s>\n<|user|>\nHello</s>\n<|assistant|>\n");
}

TEST(ChatTemplate, Phi3) {
  EXPECT_EQ(render("phi3", {{"user", "Hello"}}, true, "<s>", "<|endoftext|>"),
            "<|user|>\nHello<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render("phi3", {{"user", "Hello"}, {"assistant", "Hi"}}, false, "<s>", "<|endoftext|>"),
            "<|user|>\nHello<|end|>\n<|assistant|>\nHi<|end|>\n<|endoftext|>");
}

TEST(ChatTemplate, Gemma) {
  EXPECT_EQ(render("gemma", kChat, true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there!<end_of_turn>\n"
            "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, DetectsFamilies) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + "
       "m['content'] | trim + '<|eot_id|>' }}{% endfor %}",
       "llama3"},
      {"{% if messages[0]['role'] == 'system' %}{% set content = '<<SYS>>\\n' + system_message %}{% endif %}"
       "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}",
       "llama2"},
      {"{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %}",
       "mistral"},
      {"{% for message in messages %}{{ '<|user|>\\n' + message['content'] + eos_token }}{{ '<|assistant|>' }}"
       "{% endfor %}",
       "zephyr"},
      {"{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{{ '<|assistant|>\\n' }}", "phi3"},
      {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", "gemma"},
      {"{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}", "chatml"},
  };
  for (const auto& [jinja, name] : cases) {
    auto t = detect(jinja);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().to_string();
    EXPECT_EQ(t->name, name);
  }
}

TEST(ChatTemplate, UnknownTemplateSaysHowToChoose) {
  auto t = detect("{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(t.status().message().find("--chat-template"), std::string::npos);
  for (const auto& name : known_names()) {
    EXPECT_NE(t.status().message().find(name), std::string::npos) << name;
    EXPECT_TRUE(by_name(name).ok()) << name;
  }
  EXPECT_FALSE(detect("").ok());
  auto b = by_name("vicuna");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("vicuna"), std::string::npos);
}

TEST(ChatTemplate, ValidatesRoles) {
  auto chatml = *by_name("chatml");
  EXPECT_FALSE(apply(chatml, {}, true, "", "").ok());
  auto bad = apply(chatml, {{"robot", "beep"}}, true, "", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'robot'"), std::string::npos);
  EXPECT_TRUE(apply(chatml, {{"tool", "42"}}, true, "", "").ok());
  EXPECT_FALSE(apply(*by_name("llama3"), {{"tool", "42"}}, true, "", "").ok());
  // Alternation is enforced where the real template raises.
  for (const char* name : {"llama2", "mistral", "gemma"}) {
    auto t = *by_name(name);
    EXPECT_FALSE(apply(t, {{"assistant", "Hi"}}, true, "", "").ok()) << name;
    EXPECT_FALSE(apply(t, {{"user", "a"}, {"user", "b"}}, true, "", "").ok()) << name;
    EXPECT_FALSE(apply(t, {{"system", "s"}}, true, "", "").ok()) << name;
    EXPECT_FALSE(apply(t, {{"user", "a"}, {"system", "s"}}, true, "", "").ok()) << name;
  }
}

}  // namespace
}  // namespace troupe::chat

namespace troupe::chat {
namespace {

// Llama 3.1 and 3.2 always write a system turn with the knowledge and today's dates; 3.1's
// template fixes the date, 3.2's asks strftime_now. Excerpts of the real templates' text.
TEST(ChatTemplate, Llama31And32WriteTheDatedSystemTurn) {
  const std::string common =
      "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
      "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}{{- system_message }}{{- \"<|eot_id|>\" }}";
  auto t31 = detect("{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}" + common);
  ASSERT_TRUE(t31.ok());
  EXPECT_EQ(t31->name, "llama3.1");
  auto t32 = detect("{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") %}" + common);
  ASSERT_TRUE(t32.ok());
  EXPECT_EQ(t32->name, "llama3.2");
  auto r = apply(*t31, {{"system", " Be brief. "}, {"user", "Hi"}}, true, "<|begin_of_text|>", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Without a system message the turn is still there, empty after the dates; 3.2 dates it today.
  auto r32 = apply(*t32, {{"user", "Hi"}}, false, "", "");
  ASSERT_TRUE(r32.ok());
  const std::string head = "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ";
  ASSERT_EQ(r32->rfind(head, 0), 0u) << *r32;
  const size_t date_end = r32->find("\n\n<|eot_id|>");
  ASSERT_NE(date_end, std::string::npos) << *r32;
  EXPECT_EQ(date_end - head.size(), 11u) << *r32;  // "01 Dec 2026"
}

// Qwen2.5's template is chatml with a default system prompt in its else branch; Qwen3's is
// chatml without one; Phi-3's is phi3.
TEST(ChatTemplate, QwenAndPhi3FilesPickTheirFamily) {
  auto q25 = detect(
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
      "helpful assistant.<|im_end|>\\n' }}{%- endif %}");
  ASSERT_TRUE(q25.ok());
  EXPECT_EQ(q25->family, Family::chatml);
  EXPECT_EQ(q25->default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  auto q3 = detect("{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}"
                   "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}");
  ASSERT_TRUE(q3.ok());
  EXPECT_EQ(q3->family, Family::chatml);
  EXPECT_EQ(q3->default_system, "");
  auto phi = detect("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + "
                    "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + "
                    "message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}"
                    "{{ '<|assistant|>\\n' }}{% endif %}");
  ASSERT_TRUE(phi.ok());
  EXPECT_EQ(phi->name, "phi3");
  auto none = detect("");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("llama3.2"), std::string::npos) << none.status().message();
}

}  // namespace
}  // namespace troupe::chat
