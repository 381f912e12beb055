// Values: one rule per distinct conjunction of subschemas (memoised, so $ref
// recursion is grammar recursion); anyOf/oneOf distributed over the rest of
// the conjunction, one alternative per branch; scalar types as one lexeme;
// enum and const as literals.
#include "runtime/rank/structured/json_schema_compiler.hpp"

#include <cmath>
#include <set>

#include "runtime/text/json/python_json.hpp"
#include "runtime/rank/structured/regex_syntax.hpp"

namespace troupe::structured {

SchemaCompiler::SchemaCompiler(const SchemaJson& root, ExprId whitespace, GrammarBuilder& builder)
    : b_(builder),
      s_(builder.exprs()),
      index_(root),
      facts_(index_, uses_legacy_refs(root)),
      lex_(builder.exprs(), whitespace) {
  open_object_ = b_.token(lex_.open_object(), "{");
  close_object_ = b_.token(lex_.close_object(), "}");
  open_array_ = b_.token(lex_.open_array(), "[");
  close_array_ = b_.token(lex_.close_array(), "]");
  comma_ = b_.token(lex_.comma(), ",");
}

Result<Symbol> SchemaCompiler::value(Conjunction conj) {
  conj = facts_.normalize(std::move(conj));
  std::vector<std::pair<const SchemaJson*, uint8_t>> key;
  for (const SchemaPart& p : conj) key.emplace_back(p.node, p.done);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  TROUPE_RETURN_IF_ERROR(b_.check_budget());
  if (depth_ >= kMaxNesting) {
    return invalid_argument("JSON Schema: values nested more than " + std::to_string(kMaxNesting) +
                            " deep (the nesting limit)");
  }
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(++x) {}
    ~Depth() { --d; }
  } depth(depth_);
  Symbol rule = b_.rule("value" + std::to_string(memo_.size()));
  memo_.emplace(std::move(key), rule);
  auto f = facts_.facts(conj);
  if (!f) return f.status();
  if (f->never) return rule;  // no productions: the value can never be written
  if (!f->choices.empty()) {
    TROUPE_RETURN_IF_ERROR(distribute(conj, *f, rule));
  } else {
    TROUPE_RETURN_IF_ERROR(typed(*f, rule));
  }
  return rule;
}

// value -> (conjunction + branch 1) | (conjunction + branch 2) | ... for the first anyOf /
// oneOf; the branches' own choices are distributed by their values in turn.
Status SchemaCompiler::distribute(const Conjunction& conj, const SchemaFacts& f, Symbol rule) {
  const SchemaFacts::Choice& choice = f.choices.front();
  const SchemaJson& written = (*choice.node)[choice.which == 1 ? "anyOf" : "oneOf"];
  std::vector<const SchemaJson*> branches;
  for (const auto& b : written) branches.push_back(&b);
  if (choice.which == 2) {  // oneOf: exactly one branch, the same as anyOf when they are disjoint
    auto exclusive = exclusive_required(written);
    if (!exclusive) return exclusive.status();
    if (!exclusive->empty()) {
      branches = *exclusive;
    } else {
      TROUPE_RETURN_IF_ERROR(check_disjoint(conj, choice, written));
    }
  }
  for (const SchemaJson* branch : branches) {
    Conjunction next = conj;
    next.push_back({choice.node, choice.which});
    next.push_back({branch, 0});
    auto v = value(std::move(next));
    if (!v) return v.status();
    b_.add(rule, {*v});
  }
  return {};
}

Status SchemaCompiler::check_disjoint(const Conjunction& conj, const SchemaFacts::Choice& choice,
                                      const SchemaJson& branches) {
  for (size_t i = 0; i < branches.size(); ++i) {
    for (size_t j = i + 1; j < branches.size(); ++j) {
      disjoint_checks_ = 0;  // the proof's budget is per pair of branches
      Conjunction a = conj, b = conj;
      a.push_back({choice.node, choice.which});
      a.push_back({&branches[i], 0});
      b.push_back({choice.node, choice.which});
      b.push_back({&branches[j], 0});
      auto d = disjoint(a, b, 0);
      if (!d) return d.status();
      if (!*d) {
        return invalid_argument("JSON Schema keyword 'oneOf' is not supported here: branches " + std::to_string(i) +
                                " and " + std::to_string(j) +
                                " may both match a value (only disjoint branches are enforced exactly)");
      }
    }
  }
  return {};
}

// oneOf whose branches only require keys ("one of these keys, not several") is exact as an
// anyOf of objects: branch i's keys present, and for every other branch j one of its keys
// absent (branch i is never the only match when j's keys are a subset of i's). Empty when the
// branches are not of that form.
Result<std::vector<const SchemaJson*>> SchemaCompiler::exclusive_required(const SchemaJson& branches) {
  static const std::set<std::string> kAnnotations = {"description", "title", "$comment", "examples"};
  std::vector<std::vector<std::string>> required;
  for (const auto& b : branches) {
    if (!b.is_object() || !b.contains("required") || !b["required"].is_array()) return std::vector<const SchemaJson*>{};
    for (const auto& [k, v] : b.items()) {
      if (k != "required" && !kAnnotations.count(k)) return std::vector<const SchemaJson*>{};
    }
    std::vector<std::string> keys;
    for (const auto& r : b["required"]) {
      if (!r.is_string()) return std::vector<const SchemaJson*>{};
      keys.push_back(r.get<std::string>());
    }
    required.push_back(keys);
  }
  if (required.size() < 2) return std::vector<const SchemaJson*>{};
  std::vector<const SchemaJson*> out;
  for (size_t i = 0; i < required.size(); ++i) {
    const std::set<std::string> mine(required[i].begin(), required[i].end());
    // For each other branch, the keys that could be the absent one.
    std::vector<std::vector<std::string>> absent_choices;
    bool possible = true;
    for (size_t j = 0; j < required.size() && possible; ++j) {
      if (j == i) continue;
      std::vector<std::string> candidates;
      for (const std::string& k : required[j]) {
        if (!mine.count(k)) candidates.push_back(k);
      }
      possible = !candidates.empty();
      absent_choices.push_back(candidates);
    }
    if (!possible) continue;
    size_t combos = 1;
    for (const auto& c : absent_choices) {
      combos *= c.size();
      if (combos > 256) return invalid_argument("JSON Schema keyword 'oneOf' is not supported here: too many key combinations");
    }
    for (size_t n = 0; n < combos; ++n) {
      SchemaJson s = {{"type", "object"}, {"required", required[i]}, {"properties", SchemaJson::object()}};
      size_t rest = n;
      for (const auto& c : absent_choices) {
        s["properties"][c[rest % c.size()]] = false;
        rest /= c.size();
      }
      synthesized_.push_back(std::move(s));
      out.push_back(&synthesized_.back());
    }
  }
  if (out.empty()) out.push_back(&false_schema());
  return out;
}

Status SchemaCompiler::typed(const SchemaFacts& f, Symbol rule) {
  if (f.has_enum) {
    std::vector<std::string> scalars;
    size_t checked = 0;
    for (const SchemaJson* v : f.enum_values) {
      if (++checked % 1024 == 0) TROUPE_RETURN_IF_ERROR(b_.check_budget());
      auto ok = satisfies_facts(*v, f, 0, /*member_of_enum=*/true);
      if (!ok) return ok.status();
      if (!*ok) continue;
      if (v->is_object() || v->is_array()) {
        auto lit = literal(*v);
        if (!lit) return lit.status();
        b_.add(rule, {*lit});
      } else {
        auto texts = scalar_literal_texts(*v);
        scalars.insert(scalars.end(), texts.begin(), texts.end());
      }
    }
    if (!scalars.empty()) {
      std::vector<std::string_view> views(scalars.begin(), scalars.end());
      b_.add(rule, {b_.token(s_.literal_set(std::move(views)), "literal")});
    }
    return {};
  }
  std::vector<ExprId> scalars;
  if (f.types & kNullType) scalars.push_back(s_.literal("null"));
  if (f.types & kBooleanType) scalars.push_back(s_.alt(s_.literal("true"), s_.literal("false")));
  if (f.types & kStringType) {
    auto e = lex_.string(f.string);
    if (!e) return e.status();
    scalars.push_back(*e);
  }
  if (f.types & (kIntegerType | kFractionType)) {
    NumberConstraints n = f.number;
    n.integer = !(f.types & kFractionType);
    scalars.push_back(lex_.number(n));
  }
  if (!scalars.empty()) b_.add(rule, {b_.token(s_.alt(scalars), "scalar")});
  if (f.types & kObjectType) {
    auto o = object(f);
    if (!o) return o.status();
    b_.add(rule, {*o});
  }
  if (f.types & kArrayType) {
    auto a = array(f);
    if (!a) return a.status();
    b_.add(rule, {*a});
  }
  return {};
}

// A scalar literal in the forms a value equal to it may be written: an integral number as
// an integer or with ".0" (Python writes 5.0 for a float), other numbers as Python's repr.
std::vector<std::string> SchemaCompiler::scalar_literal_texts(const SchemaJson& v) {
  if (v.is_number()) {
    double d = v.get<double>();
    if (v.is_number_integer() || (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e16)) {
      std::string text = v.is_number_float() ? std::to_string(static_cast<int64_t>(d)) : v.dump();
      if (text == "-0") text = "0";
      return {text, text + ".0"};
    }
    return {json_io::python_float_repr(d)};
  }
  return {json_io::python_json_dumps(v, /*compact=*/true)};
}

// An object or array literal, with the whitespace JSON allows between its tokens.
Result<Symbol> SchemaCompiler::literal(const SchemaJson& v) {
  TROUPE_RETURN_IF_ERROR(b_.check_budget());
  if (!v.is_object() && !v.is_array()) {
    auto texts = scalar_literal_texts(v);
    std::vector<std::string_view> views(texts.begin(), texts.end());
    return b_.token(s_.literal_set(std::move(views)), "literal");
  }
  Symbol rule = b_.rule("literal");
  std::vector<Symbol> rhs{v.is_object() ? open_object_ : open_array_};
  bool first = true;
  if (v.is_object()) {
    for (const auto& [k, e] : v.items()) {
      if (!first) rhs.push_back(comma_);
      first = false;
      rhs.push_back(b_.token(lex_.key(k), "key"));
      auto sub = literal(e);
      if (!sub) return sub;
      rhs.push_back(*sub);
    }
  } else {
    for (const auto& e : v) {
      if (!first) rhs.push_back(comma_);
      first = false;
      auto sub = literal(e);
      if (!sub) return sub;
      rhs.push_back(*sub);
    }
  }
  rhs.push_back(v.is_object() ? close_object_ : close_array_);
  b_.add(rule, std::move(rhs));
  return rule;
}

Result<ExprId> json_whitespace(ExprStore& s, const JsonSchemaOptions& options) {
  if (options.whitespace_pattern) {
    auto tree = parse_regex(*options.whitespace_pattern, RegexDialect::python);
    if (!tree) return invalid_argument("whitespace_pattern: " + tree.status().message());
    auto e = lower_full_match(s, *tree, utf8_encoder(s));
    if (!e) return invalid_argument("whitespace_pattern: " + e.status().message());
    return *e;
  }
  if (options.compact) return ExprStore::kEmpty;
  ByteSet space;
  for (char c : {' ', '\t', '\n', '\r'}) space.add(static_cast<uint8_t>(c));
  return s.repeat(s.bytes(space), 0, options.max_whitespace);
}

Result<std::shared_ptr<const Grammar>> compile_json_schema_grammar(std::string_view schema_json,
                                                                   const JsonSchemaOptions& options,
                                                                   const GrammarLimits& limits) {
  SchemaJson root;
  try {
    root = SchemaJson::parse(schema_json);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("JSON Schema: not valid JSON: ") + e.what());
  }
  GrammarBuilder builder(limits);
  auto ws = json_whitespace(builder.exprs(), options);
  if (!ws) return ws.status();
  SchemaCompiler compiler(root, *ws, builder);
  auto start = compiler.value({{&root, 0}});
  if (!start) return start.status();
  return builder.build(*start);
}

}  // namespace troupe::structured
