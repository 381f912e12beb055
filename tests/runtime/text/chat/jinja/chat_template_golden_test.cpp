// Every template of tests/data/chat_templates with every conversation of
// conversations.json, rendered as the server renders them, against Python jinja2
// set up as transformers sets it up (tests/golden/gen_chat_template_goldens.py):
// the same bytes, or both fail.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/text/chat/chat_template.hpp"
#include "runtime/text/chat/model_chat_template.hpp"

namespace troupe::chat {
namespace {

using ojson = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kDir = std::string(TROUPE_TEST_DATA_DIR) + "/chat_templates/";

/// The generator's FIXED_NOW (2026-01-15 09:30:00, local time).
std::time_t fixed_now() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 15;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

/// Renders every case of `golden` and compares; returns {identical texts, errors on both sides}.
std::pair<size_t, size_t> check_goldens(const ojson& golden, const std::string& template_dir) {
  const ojson conversations = ojson::parse(read_file(kDir + "conversations.json"));
  std::map<std::string, ojson> by_name;
  for (const auto& c : conversations) by_name[c["name"].get<std::string>()] = c;

  std::map<std::string, Result<ModelChatTemplate>> compiled;
  size_t matched = 0, errors = 0;
  for (const auto& c : golden["cases"]) {
    const std::string name = c["template"], conv_name = c["conversation"];
    SCOPED_TRACE(name + " x " + conv_name);
    auto it = compiled.find(name);
    if (it == compiled.end()) it = compiled.emplace(name, compile_chat_template(read_file(template_dir + name + ".jinja"))).first;
    const ojson& conv = by_name.at(conv_name);
    Result<std::string> out = it->second.status();
    if (it->second.ok()) {
      ChatTemplateInput in;
      in.messages = conv["messages"];
      if (conv.contains("tools")) in.tools = conv["tools"];
      in.add_generation_prompt = conv.value("add_generation_prompt", false);
      in.continue_final_message = conv.value("continue_final_message", false);
      if (conv.contains("chat_template_kwargs")) in.kwargs = conv["chat_template_kwargs"];
      in.bos_token = c["bos_token"];
      in.eos_token = c["eos_token"];
      in.now = fixed_now();
      out = render_chat_template(*it->second, in);
    }
    if (c.contains("error")) {
      EXPECT_FALSE(out.ok()) << "jinja2 failed with " << c["error"] << " but troupe rendered:\n" << *out;
      if (!out.ok()) ++errors;
      // raise_exception's message reaches the client as the template wrote it.
      const std::string py = c["error"];
      if (!out.ok() && py.rfind("TemplateError: ", 0) == 0) {
        EXPECT_NE(out.status().message().find(py.substr(15)), std::string::npos) << out.status().message();
      }
    } else {
      EXPECT_TRUE(out.ok()) << out.status().to_string();
      if (!out.ok()) continue;
      EXPECT_EQ(*out, c["output"].get<std::string>());
      if (*out == c["output"].get<std::string>()) ++matched;
    }
  }
  std::printf("chat templates: %zu cases, %zu texts identical to jinja2, %zu failing on both sides\n",
              golden["cases"].size(), matched, errors);
  return {matched, errors};
}

TEST(ChatTemplateGolden, EveryTemplateAndConversationMatchesJinja2) {
  const ojson golden = ojson::parse(read_file(std::string(TROUPE_TEST_DATA_DIR) + "/golden/chat_template_goldens.json"));
  ASSERT_GT(golden["cases"].size(), 100u);
  auto [matched, errors] = check_goldens(golden, kDir);
  EXPECT_EQ(matched + errors, golden["cases"].size());
}

// The built-in families are the fallback for files without a template: where a family
// mirrors one of our files' templates (smollm2, qwen2 -> chatml), it must render what
// jinja2 renders from the real template.
TEST(ChatTemplateGolden, BuiltinFallbacksAgreeWithTheRealTemplates) {
  const ojson golden = ojson::parse(read_file(std::string(TROUPE_TEST_DATA_DIR) + "/golden/chat_template_goldens.json"));
  const ojson conversations = ojson::parse(read_file(kDir + "conversations.json"));
  size_t compared = 0;
  for (const auto& c : golden["cases"]) {
    const std::string name = c["template"];
    if ((name != "smollm2" && name != "qwen2") || c.contains("error")) continue;
    const ojson* conv = nullptr;
    for (const auto& x : conversations)
      if (x["name"] == c["conversation"]) conv = &x;
    ASSERT_NE(conv, nullptr);
    if (conv->contains("tools")) continue;  // the built-ins render no tools
    SCOPED_TRACE(name + " x " + c["conversation"].get<std::string>());
    auto family = detect(read_file(kDir + name + ".jinja"));
    ASSERT_TRUE(family.ok()) << family.status().to_string();
    std::vector<Message> messages;
    bool plain = true;
    for (const auto& m : (*conv)["messages"]) {
      plain = plain && m["content"].is_string() && !m.contains("tool_calls") && m["role"] != "tool";
      if (plain) messages.push_back({m["role"], m["content"]});
    }
    if (!plain) continue;
    auto out = apply(*family, messages, conv->value("add_generation_prompt", false), c["bos_token"], c["eos_token"]);
    if (out.ok() && conv->value("continue_final_message", false)) out = continue_final_message(*out, messages);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(*out, c["output"].get<std::string>());
    ++compared;
  }
  EXPECT_GE(compared, 10u);
}

// Another collection (gen_chat_template_goldens.py --templates DIR --out FILE), e.g. llama.cpp's
// models/templates: set TROUPE_CHAT_TEMPLATE_GOLDENS=FILE.
TEST(ChatTemplateGolden, ExternalCollectionWhenGiven) {
  const char* path = std::getenv("TROUPE_CHAT_TEMPLATE_GOLDENS");
  if (!path || !*path) GTEST_SKIP() << "TROUPE_CHAT_TEMPLATE_GOLDENS is not set";
  const ojson golden = ojson::parse(read_file(path));
  ASSERT_TRUE(golden.contains("template_dir")) << path << " names no template_dir";
  auto [matched, errors] = check_goldens(golden, golden["template_dir"].get<std::string>() + "/");
  EXPECT_EQ(matched + errors, golden["cases"].size());
}

}  // namespace
}  // namespace troupe::chat
