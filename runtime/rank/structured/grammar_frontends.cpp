// Regex, choice and structural-tag grammars (text grammars: grammar_lowering.cpp).
#include "runtime/rank/structured/grammar_frontends.hpp"

#include <nlohmann/json.hpp>

#include "runtime/rank/structured/json_schema_compiler.hpp"
#include "runtime/rank/structured/regex_syntax.hpp"

namespace troupe::structured {

Result<std::shared_ptr<const Grammar>> compile_regex_grammar(std::string_view pattern, const GrammarLimits& limits) {
  GrammarBuilder b(limits);
  auto tree = parse_regex(pattern, RegexDialect::python);
  if (!tree) return tree.status();
  auto e = lower_full_match(b.exprs(), *tree, utf8_encoder(b.exprs()));
  if (!e) return e.status();
  Symbol start = b.rule("start");
  b.add(start, {b.token(*e, "regex")});
  return b.build(start);
}

Result<std::shared_ptr<const Grammar>> compile_choice_grammar(const std::vector<std::string>& choices,
                                                              const GrammarLimits& limits) {
  if (choices.empty()) return invalid_argument("choice: at least one choice is needed");
  GrammarBuilder b(limits);
  std::vector<std::string_view> views(choices.begin(), choices.end());
  Symbol start = b.rule("start");
  b.add(start, {b.token(b.exprs().literal_set(std::move(views)), "choice")});
  return b.build(start);
}

Result<std::shared_ptr<const Grammar>> compile_structural_tag(std::string_view json, const JsonSchemaOptions& options,
                                                              const GrammarLimits& limits) {
  nlohmann::ordered_json tag;
  try {
    tag = nlohmann::ordered_json::parse(json);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("structural_tag: not valid JSON: ") + e.what());
  }
  if (!tag.is_object()) return invalid_argument("structural_tag: an object is expected");
  if (tag.contains("format")) {
    return invalid_argument("structural_tag: the \"format\" form is not supported (use \"structures\" and \"triggers\")");
  }
  if (!tag.contains("structures") || !tag["structures"].is_array() || !tag.contains("triggers") ||
      !tag["triggers"].is_array()) {
    return invalid_argument("structural_tag: \"structures\" and \"triggers\" arrays are required");
  }
  std::vector<std::string> triggers;
  for (const auto& t : tag["triggers"]) {
    if (!t.is_string() || t.get<std::string>().empty()) {
      return invalid_argument("structural_tag: each trigger must be a non-empty string");
    }
    triggers.push_back(t.get<std::string>());
  }
  GrammarBuilder b(limits);
  ExprStore& s = b.exprs();
  auto ws = json_whitespace(s, options);
  if (!ws) return ws.status();
  // Free text: any text in which no trigger occurs.
  std::vector<std::string_view> views(triggers.begin(), triggers.end());
  ExprId any = s.star(utf8_expr(s, CodepointSet::all()));
  ExprId free_text = s.negate(s.concat(std::vector<ExprId>{any, s.literal_set(views), any}));
  free_text = s.both(free_text, any);  // and valid UTF-8
  // output: (free begin_i json_i end_i)* free
  Symbol segments = b.rule("segments");
  b.add(segments, {});
  std::vector<std::unique_ptr<SchemaJson>> schemas;
  for (const auto& st : tag["structures"]) {
    if (!st.is_object() || !st.contains("begin") || !st["begin"].is_string() || !st.contains("end") ||
        !st["end"].is_string() || !st.contains("schema")) {
      return invalid_argument("structural_tag: each structure needs \"begin\", \"schema\" and \"end\"");
    }
    const std::string begin = st["begin"].get<std::string>();
    bool triggered = false;
    for (const std::string& t : triggers) triggered = triggered || begin.rfind(t, 0) == 0;
    if (!triggered) return invalid_argument("structural_tag: begin \"" + begin + "\" starts with no trigger");
    schemas.push_back(std::make_unique<SchemaJson>(st["schema"]));
    SchemaCompiler compiler(*schemas.back(), *ws, b);
    auto value = compiler.value({{schemas.back().get(), 0}});
    if (!value) return invalid_argument("structural_tag: " + value.status().message());
    Symbol open = b.token(s.concat(free_text, s.literal(begin)), "text and begin");
    Symbol close = b.token(s.literal(st["end"].get<std::string>()), "end");
    b.add(segments, {segments, open, *value, close});
  }
  Symbol start = b.rule("start");
  b.add(start, {segments, b.token(free_text, "text")});
  return b.build(start);
}

}  // namespace troupe::structured
