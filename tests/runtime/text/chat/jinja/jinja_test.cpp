// The jinja engine on its own: jinja2's semantics that the golden corpus does not
// reach, errors and the sandbox's limits. Expected texts are jinja2 3.1's output
// for the same template (checked with python3 -c 'import jinja2 ...').
#include <gtest/gtest.h>

#include "runtime/text/chat/chat_prompt.hpp"
#include "runtime/text/chat/jinja/template.hpp"
#include "runtime/text/chat/model_chat_template.hpp"

namespace troupe::jinja {
namespace {

Result<std::string> render(const std::string& src, ValueDict ctx = {}) {
  auto t = Template::compile(src);
  if (!t.ok()) return t.status();
  return t->render(Value(std::move(ctx)));
}

std::string ok(const std::string& src, ValueDict ctx = {}) {
  auto r = render(src, std::move(ctx));
  EXPECT_TRUE(r.ok()) << src << ": " << r.status().to_string();
  return r.ok() ? *r : "<error>";
}

std::string err(const std::string& src) {
  auto r = render(src);
  EXPECT_FALSE(r.ok()) << src << " rendered " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.status().message();
}

TEST(Jinja, WhitespaceControlAsTransformersConfiguresIt) {
  // trim_blocks drops the newline after a tag, lstrip_blocks the indent before it.
  EXPECT_EQ(ok("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(ok("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(ok("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(ok("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(ok("a {# c #} b\n{# line #}\nc"), "a  b\nc");
  EXPECT_EQ(ok("x\n"), "x");      // one trailing newline is dropped
  EXPECT_EQ(ok("x\n\n"), "x\n");
  EXPECT_EQ(ok("a\r\nb"), "a\nb");
  EXPECT_EQ(ok("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(Jinja, UndefinedIsJinja2sDefault) {
  EXPECT_EQ(ok("[{{ nope }}]{{ nope is defined }}{{ nope | length }}{% for x in nope %}x{% endfor %}"), "[]False0");
  EXPECT_EQ(ok("{{ d.missing is defined }}[{{ d.missing }}]", {{{Value("d"), Value(ValueDict{})}}}), "False[]");
  EXPECT_NE(err("{{ nope.attr }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(err("{{ nope + 1 }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(err("{{ nope() }}").find("'nope' is undefined"), std::string::npos);
  ValueDict ctx{{{Value("d"), Value(ValueDict{})}}};
  auto r = render("{{ d.missing.deeper }}", ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'dict object' has no attribute 'missing'"), std::string::npos);
}

TEST(Jinja, ScopesLoopControlsAndNamespaces) {
  EXPECT_EQ(ok("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(ok("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"), "4");
  EXPECT_EQ(ok("{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0246");
  EXPECT_EQ(ok("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(ok("{% macro m(a, b='B') %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }} {{ m(1, 2, 3, k=4) }}"),
            "1B(){} 12(3,){'k': 4}");
  EXPECT_EQ(ok("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
}

TEST(Jinja, ToJsonAsTransformers) {
  EXPECT_EQ(ok("{{ {'b': 'ü\"\\n', 'a': [1.0, 1e-7, 1.2345678901234567e19, none]} | tojson }}"),
            "{\"b\": \"ü\\\"\\n\", \"a\": [1.0, 1e-07, 1.2345678901234567e+19, null]}");
  EXPECT_EQ(ok("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(ok("{{ '<>&\\'' | tojson }}"), "\"<>&'\"");  // no HTML escaping, unlike jinja2's own tojson
  EXPECT_NE(err("{{ nope | tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(Jinja, NumbersPrintAsPython) {
  EXPECT_EQ(ok("{{ 1.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 2 ** 62 }} {{ 1 / 8 }}"),
            "1.0 1e+16 1000000000000000.0 0.0001 1e-05 -0.0 4611686018427387904 0.125");
}

TEST(Jinja, ErrorsNameTheProblem) {
  EXPECT_NE(err("{% for x in y %}").find("line 1"), std::string::npos);
  EXPECT_NE(err("{% if x %}{% endfor %}").find("syntax error"), std::string::npos);
  EXPECT_NE(err("{% include 'x' %}").find("unsupported tag 'include'"), std::string::npos);
  EXPECT_NE(err("{{ x | no_such_filter }}").find("no filter named 'no_such_filter'"), std::string::npos);
  EXPECT_NE(err("{{ raise_exception('bad input') }}").find("the template raised an error: bad input"), std::string::npos);
  EXPECT_NE(err("{{ [].append(1) }}").find("unsafe"), std::string::npos);
  EXPECT_NE(err("{{ 1 + 'a' }}").find("unsupported operand"), std::string::npos);
  EXPECT_NE(err("{{ 1 // 0 }}").find("ZeroDivisionError"), std::string::npos);
  EXPECT_NE(err("{{ '%s' % 1 }}").find("not supported"), std::string::npos);
}

TEST(Jinja, SandboxLimitsStopRunawayTemplates) {
  EXPECT_NE(err("{{ range(100001) | length }}").find("Range too big"), std::string::npos);
  EXPECT_NE(err("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").find("loop iterations"),
            std::string::npos);
  EXPECT_NE(err("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"), std::string::npos);
  EXPECT_NE(err("{{ 'x' * 100000000 }}").find("too large"), std::string::npos);
}

TEST(ModelChatTemplate, TokenizerConfigAndFlagForms) {
  EXPECT_EQ(*chat::chat_template_from_tokenizer_config(nlohmann::json::parse(R"({"chat_template": "{{ x }}"})")), "{{ x }}");
  EXPECT_EQ(*chat::chat_template_from_tokenizer_config(nlohmann::json::parse(
                R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})")),
            "D");
  EXPECT_FALSE(chat::chat_template_from_tokenizer_config(nlohmann::json::parse(R"({"x": 1})")).ok());
  EXPECT_EQ(*chat::read_chat_template_arg("{{ a }}\\n"), "{{ a }}\n");
  EXPECT_FALSE(chat::read_chat_template_arg("/no/such/template.jinja").ok());
}

TEST(ModelChatTemplate, ContextAsTransformersBuildsIt) {
  auto t = chat::compile_chat_template(
      "{{ bos_token }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ extra }}|{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  chat::ChatTemplateInput in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  in.bos_token = "<s>";
  in.kwargs = {{"extra", 7}};
  EXPECT_EQ(*chat::render_chat_template(*t, in), "<s>|None|None|True|7|hi");
  in.kwargs = {{"messages", 1}};
  EXPECT_FALSE(chat::render_chat_template(*t, in).ok());
}

// vLLM's message form for templates: arguments parsed to objects (key order kept), text
// parts joined with "\n", tools with description/parameters null when absent.
TEST(ModelChatTemplate, RequestMessagesInVllmsTemplateForm) {
  using ojson = nlohmann::ordered_json;
  auto m = chat::template_message(ojson::parse(
      R"({"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function",
          "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [true]}"}}]})"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->dump(), R"({"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":{"z":1,"a":[true]}}}]})");
  auto parts = chat::template_message(ojson::parse(
      R"({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "n"})"));
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->dump(), R"({"role":"user","content":"a\nb","name":"n"})");
  EXPECT_FALSE(chat::template_message(ojson::parse(
      R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]})")).ok());
  auto tools = chat::template_tools(ojson::parse(R"([{"type": "function", "function": {"name": "f"}}])"));
  ASSERT_TRUE(tools.ok());
  EXPECT_EQ(tools->dump(), R"([{"type":"function","function":{"name":"f","description":null,"parameters":null}}])");
  EXPECT_FALSE(chat::template_tools(ojson::parse(R"([{"type": "function"}])")).ok());
}

}  // namespace
}  // namespace troupe::jinja
