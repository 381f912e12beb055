// Objects: the declared properties in order (a required one must come, an
// optional one may be skipped), then any number of other keys (those matching
// a patternProperties pattern, then additionalProperties), with the property
// count tracked in the rules when min/maxProperties bound it:
//   props(i, c): the declared properties from i on, c properties written so far.
#include <algorithm>
#include <set>

#include "runtime/rank/structured/json_schema_compiler.hpp"
#include "runtime/text/json/python_json.hpp"
#include "runtime/rank/structured/regex_syntax.hpp"

namespace troupe::structured {
namespace {

constexpr size_t kMaxObjectRules = 200'000;
constexpr size_t kMaxPatternSubsets = 6;  // patterns whose overlaps get their own key classes

const SchemaJson* member(const SchemaJson& node, const char* key) {
  auto it = node.find(key);
  return it == node.end() ? nullptr : &*it;
}

}  // namespace

std::vector<SchemaCompiler::ObjectPart> SchemaCompiler::object_parts(const SchemaFacts& f) {
  std::vector<ObjectPart> parts;
  for (const SchemaJson* node : f.parts) {
    if (!node->is_object()) continue;
    ObjectPart p{member(*node, "properties"), member(*node, "patternProperties"), member(*node, "additionalProperties"),
                 member(*node, "propertyNames"), member(*node, "required")};
    if (p.properties || p.pattern_properties || p.additional || p.property_names || p.required) parts.push_back(p);
  }
  return parts;
}

Result<Conjunction> SchemaCompiler::property_schema(const std::vector<ObjectPart>& parts, const std::string& key,
                                                    bool* declared) {
  Conjunction conj;
  *declared = false;
  for (const ObjectPart& p : parts) {
    bool matched = false;
    if (p.properties && p.properties->is_object()) {
      auto it = p.properties->find(key);
      if (it != p.properties->end()) {
        conj.push_back({&*it, 0});
        matched = true;
        *declared = true;
      }
    }
    if (p.pattern_properties && p.pattern_properties->is_object()) {
      for (const auto& [pattern, schema] : p.pattern_properties->items()) {
        auto m = pattern_matches(pattern, key);
        if (!m) return m.status();
        if (*m) {
          conj.push_back({&schema, 0});
          matched = true;
        }
      }
    }
    if (!matched && p.additional) conj.push_back({p.additional, 0});
  }
  return conj;
}

Result<ExprId> SchemaCompiler::property_names_content(const std::vector<ObjectPart>& parts) {
  std::vector<ExprId> all{s_.star(lex_.chars(CodepointSet::all(), /*canonical=*/true))};
  for (const ObjectPart& p : parts) {
    if (!p.property_names) continue;
    auto f = facts_.facts(facts_.normalize({{p.property_names, 0}}));
    if (!f) return f.status();
    if (!f->choices.empty()) {
      return invalid_argument("JSON Schema keyword 'propertyNames' is not supported with anyOf/oneOf inside");
    }
    if (f->never || !(f->types & kStringType)) return ExprStore::kNothing;
    if (f->has_enum) {
      std::vector<ExprId> names;
      for (const SchemaJson* v : f->enum_values) {
        if (!v->is_string()) continue;
        auto ok = satisfies_facts(*v, *f, 0, /*member_of_enum=*/true);
        if (!ok) return ok.status();
        std::string quoted = json_io::python_json_string(v->get<std::string>());
        if (*ok) names.push_back(s_.literal(quoted.substr(1, quoted.size() - 2)));
      }
      all.push_back(s_.alt(names));
      continue;
    }
    auto content = lex_.string_content(f->string, /*canonical=*/true);
    if (!content) return content.status();
    all.push_back(*content);
  }
  return s_.both(all);
}

// Declared keys in the order written, then required keys no part declares.
Result<std::vector<std::string>> SchemaCompiler::object_keys(const std::vector<ObjectPart>& parts,
                                                             std::set<std::string>* required) {
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const ObjectPart& p : parts) {
    if (p.properties && !p.properties->is_object()) return invalid_argument("JSON Schema: 'properties' must be an object");
    if (p.properties) {
      for (const auto& [k, unused] : p.properties->items()) {
        if (seen.insert(k).second) keys.push_back(k);
      }
    }
  }
  for (const ObjectPart& p : parts) {
    if (!p.required) continue;
    if (!p.required->is_array()) return invalid_argument("JSON Schema: 'required' must be an array of strings");
    for (const auto& r : *p.required) {
      if (!r.is_string()) return invalid_argument("JSON Schema: 'required' must be an array of strings");
      required->insert(r.get<std::string>());
      if (seen.insert(r.get<std::string>()).second) keys.push_back(r.get<std::string>());
    }
  }
  // patternProperties merge only with parts that add no key rules of their own.
  size_t with_patterns = 0, with_key_rules = 0;
  for (const ObjectPart& p : parts) {
    bool restricts_extra = p.additional && !(p.additional->is_boolean() && p.additional->get<bool>());
    with_patterns += p.pattern_properties != nullptr;
    with_key_rules += p.pattern_properties != nullptr || restricts_extra;
  }
  if (with_patterns > 0 && with_key_rules > 1) {
    return invalid_argument("JSON Schema keyword 'patternProperties' is not supported in allOf with another "
                            "schema's patternProperties or additionalProperties");
  }
  return keys;
}

// The declared (and required) properties propertyNames allows, with their values; false
// when a required one is not allowed (no object can be written).
Result<bool> SchemaCompiler::declared_properties(const std::vector<ObjectPart>& parts,
                                                 const std::vector<std::string>& keys,
                                                 const std::set<std::string>& required,
                                                 std::vector<DeclaredProperty>* out) {
  for (const std::string& k : keys) {
    bool allowed = true;
    for (const ObjectPart& p : parts) {
      if (!p.property_names) continue;
      auto ok = satisfies(SchemaJson(k), facts_.normalize({{p.property_names, 0}}), 0);
      if (!ok) return ok.status();
      allowed = allowed && *ok;
    }
    const bool is_required = required.count(k) != 0;
    if (!allowed) {
      if (is_required) return false;
      continue;
    }
    bool named = false;
    auto conj = property_schema(parts, k, &named);
    if (!conj) return conj.status();
    auto v = value(*conj);
    if (!v) return v.status();
    out->push_back({b_.token(lex_.key(k), "key"), *v, is_required});
  }
  return true;
}

// Keys not declared, as (key lexeme, value) pairs: one per set of matching patterns (a key
// matching several patterns must satisfy all their schemas; past kMaxPatternSubsets
// patterns a key matching two is left out), then additionalProperties.
Status SchemaCompiler::extra_properties(const std::vector<ObjectPart>& parts, ExprId not_declared,
                                        std::vector<std::pair<Symbol, Symbol>>* out) {
  auto names = property_names_content(parts);
  if (!names) return names.status();
  std::vector<ExprId> pattern_contents;
  std::vector<const SchemaJson*> pattern_schemas;
  for (const ObjectPart& p : parts) {
    if (!p.pattern_properties) continue;
    if (!p.pattern_properties->is_object()) return invalid_argument("JSON Schema: 'patternProperties' must be an object");
    for (const auto& [pattern, schema] : p.pattern_properties->items()) {
      auto tree = parse_regex(pattern, RegexDialect::ecmascript);
      if (!tree) return invalid_argument("patternProperties \"" + pattern + "\": " + tree.status().message());
      CharEncoder canonical = [this](const CodepointSet& set) { return lex_.chars(set, true); };
      auto e = lower_search(s_, *tree, canonical, CodepointSet::all());
      if (!e) return invalid_argument("patternProperties \"" + pattern + "\": " + e.status().message());
      pattern_contents.push_back(*e);
      pattern_schemas.push_back(&schema);
    }
  }
  const size_t np = pattern_contents.size();
  std::vector<uint32_t> subsets;
  if (np <= kMaxPatternSubsets) {
    for (uint32_t set = 1; set < (1u << np); ++set) subsets.push_back(set);
  } else {
    for (size_t i = 0; i < np; ++i) subsets.push_back(1u << i);
  }
  for (uint32_t set : subsets) {
    std::vector<ExprId> all{not_declared, *names};
    Conjunction conj;
    for (size_t i = 0; i < np; ++i) {
      if ((set >> i) & 1) {
        all.push_back(pattern_contents[i]);
        conj.push_back({pattern_schemas[i], 0});
      } else {
        all.push_back(s_.negate(pattern_contents[i]));
      }
    }
    ExprId content = s_.both(all);
    if (!s_.is_live(content)) continue;
    auto v = value(conj);
    if (!v) return v.status();
    out->emplace_back(b_.token(s_.concat(lex_.quoted(content), lex_.colon()), "pattern key"), *v);
    TROUPE_RETURN_IF_ERROR(b_.check_budget());
  }
  Conjunction additional;
  for (const ObjectPart& p : parts) {
    if (!p.additional) continue;
    if (p.additional->is_boolean() && !p.additional->get<bool>()) return {};
    additional.push_back({p.additional, 0});
  }
  ExprId others[3] = {not_declared, s_.negate(s_.alt(pattern_contents)), *names};
  auto v = value(additional);
  if (!v) return v.status();
  out->emplace_back(b_.token(s_.concat(lex_.quoted(s_.both(others)), lex_.colon()), "key"), *v);
  return {};
}

// props(i, c): the declared properties from i on with c written so far (c exact up to
// maxProperties, or capped at minProperties, "at least"); props(n, c) loops over extras.
Result<Symbol> SchemaCompiler::property_sequence(const std::vector<DeclaredProperty>& declared,
                                                 const std::vector<std::pair<Symbol, Symbol>>& extras,
                                                 uint64_t min, std::optional<uint64_t> max) {
  const uint64_t cap = max ? *max : std::max<uint64_t>(min, 1);
  const size_t n = declared.size();
  if ((n + 2) * (cap + 1) > kMaxObjectRules) {
    return invalid_argument("JSON Schema: minProperties/maxProperties of " + std::to_string(cap) + " with " +
                            std::to_string(n) + " properties is over the grammar size limit");
  }
  auto next_count = [&](uint64_t c) -> std::optional<uint64_t> {
    if (max) return c + 1 <= *max ? std::optional<uint64_t>(c + 1) : std::nullopt;
    return std::min(c + 1, cap);
  };
  Symbol extra = b_.rule("extra property");
  for (auto [k, v] : extras) b_.add(extra, {k, v});
  std::vector<std::vector<Symbol>> rules(n + 1, std::vector<Symbol>(cap + 1));
  for (size_t i = 0; i <= n; ++i) {
    for (uint64_t c = 0; c <= cap; ++c) rules[i][c] = b_.rule("props");
  }
  for (uint64_t c = 0; c <= cap; ++c) {
    auto nc = next_count(c);
    if (c >= min) b_.add(rules[n][c], {});  // enough properties: the object may end
    if (nc && !extras.empty()) {
      std::vector<Symbol> rhs;
      if (c > 0) rhs.push_back(comma_);
      rhs.push_back(extra);
      rhs.push_back(rules[n][*nc]);
      b_.add(rules[n][c], std::move(rhs));
    }
    for (size_t i = 0; i < n; ++i) {
      if (nc) {
        std::vector<Symbol> rhs;
        if (c > 0) rhs.push_back(comma_);
        rhs.push_back(declared[i].key);
        rhs.push_back(declared[i].value);
        rhs.push_back(rules[i + 1][*nc]);
        b_.add(rules[i][c], std::move(rhs));
      }
      if (!declared[i].required) b_.add(rules[i][c], {rules[i + 1][c]});
    }
  }
  TROUPE_RETURN_IF_ERROR(b_.check_budget());
  return rules[0][0];
}

Result<Symbol> SchemaCompiler::object(const SchemaFacts& f) {
  std::vector<ObjectPart> parts = object_parts(f);
  std::set<std::string> required;
  auto keys = object_keys(parts, &required);
  if (!keys) return keys.status();
  std::vector<DeclaredProperty> declared;
  auto possible = declared_properties(parts, *keys, required, &declared);
  if (!possible) return possible.status();
  if (!*possible) return b_.rule("never");  // a required key its names may not have
  std::vector<ExprId> declared_contents;
  for (const std::string& k : *keys) {
    std::string quoted = json_io::python_json_string(k);
    declared_contents.push_back(s_.literal(quoted.substr(1, quoted.size() - 2)));
  }
  std::vector<std::pair<Symbol, Symbol>> extras;
  TROUPE_RETURN_IF_ERROR(extra_properties(parts, s_.negate(s_.alt(declared_contents)), &extras));
  auto props = property_sequence(declared, extras, f.min_properties, f.max_properties);
  if (!props) return props;
  Symbol obj = b_.rule("object");
  b_.add(obj, {open_object_, *props, close_object_});
  return obj;
}

}  // namespace troupe::structured
