// Checking a literal JSON value against a conjunction of subschemas: which
// enum/const values the rest of the schema still admits, and which declared
// keys propertyNames admits. The same facts as the grammar, applied to a value.
#include <algorithm>
#include <charconv>

#include "runtime/rank/structured/json_formats.hpp"
#include "runtime/rank/structured/json_schema_compiler.hpp"
#include "runtime/rank/structured/regex_syntax.hpp"

namespace troupe::structured {
namespace {

constexpr int kMaxDepth = 64;

uint64_t codepoints(const std::string& s) {
  uint64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

uint8_t type_of(const SchemaJson& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return kNullType;
    case nlohmann::json::value_t::boolean: return kBooleanType;
    case nlohmann::json::value_t::object: return kObjectType;
    case nlohmann::json::value_t::array: return kArrayType;
    case nlohmann::json::value_t::string: return kStringType;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return kIntegerType;
    case nlohmann::json::value_t::number_float: {
      double d = v.get<double>();
      return d == static_cast<double>(static_cast<int64_t>(d)) ? kIntegerType : kFractionType;
    }
    default: return 0;
  }
}

std::optional<Decimal> decimal_value(const SchemaJson& v) {
  if (v.is_number_float()) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v.get<double>());
    return Decimal::parse(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
  }
  return Decimal::parse(v.dump());
}

}  // namespace

Result<bool> SchemaCompiler::pattern_matches(const std::string& pattern, const std::string& text) {
  auto it = pattern_regex_.find(pattern);
  if (it == pattern_regex_.end()) {
    auto tree = parse_regex(pattern, RegexDialect::ecmascript);
    if (!tree) return invalid_argument("pattern \"" + pattern + "\": " + tree.status().message());
    auto e = lower_search(match_store_, *tree, utf8_encoder(match_store_), CodepointSet::all());
    if (!e) return invalid_argument("pattern \"" + pattern + "\": " + e.status().message());
    it = pattern_regex_.emplace(pattern, *e).first;
  }
  return match_store_.matches(it->second, text);
}

Result<bool> SchemaCompiler::satisfies(const SchemaJson& value, const Conjunction& conj, int depth) {
  if (depth > kMaxDepth) return invalid_argument("JSON Schema: a literal value nested too deep to check");
  auto f = facts_.facts(facts_.normalize(conj));
  if (!f) return f.status();
  if (!f->choices.empty()) {
    const SchemaFacts::Choice& choice = f->choices.front();
    for (const auto& branch : (*choice.node)[choice.which == 1 ? "anyOf" : "oneOf"]) {
      Conjunction next = conj;
      next.push_back({choice.node, choice.which});
      next.push_back({&branch, 0});
      auto ok = satisfies(value, next, depth + 1);
      if (!ok || *ok) return ok;
    }
    return false;
  }
  return satisfies_facts(value, *f, depth);
}

Result<bool> SchemaCompiler::satisfies_facts(const SchemaJson& v, const SchemaFacts& f, int depth,
                                             bool member_of_enum) {
  if (f.never || !(f.types & type_of(v))) return false;
  if (f.has_enum && !member_of_enum && std::none_of(f.enum_values.begin(), f.enum_values.end(), [&](const SchemaJson* e) { return *e == v; })) {
    return false;
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    uint64_t n = codepoints(s);
    if (n < f.string.min_length || (f.string.max_length && n > *f.string.max_length)) return false;
    for (const std::string& p : f.string.patterns) {
      auto m = pattern_matches(p, s);
      if (!m || !*m) return m;
    }
    for (const std::string& format : f.string.formats) {
      for (const std::string& p : format_patterns(format)) {
        auto m = pattern_matches("^(?:" + p + ")$", s);
        if (!m || !*m) return m;
      }
    }
  } else if (v.is_number()) {
    auto d = decimal_value(v);
    if (!d) return false;
    if (f.number.lower) {
      int c = d->compare(f.number.lower->value);
      if (c < 0 || (c == 0 && f.number.lower->exclusive)) return false;
    }
    if (f.number.upper) {
      int c = d->compare(f.number.upper->value);
      if (c > 0 || (c == 0 && f.number.upper->exclusive)) return false;
    }
  } else if (v.is_object()) {
    if (v.size() < f.min_properties || (f.max_properties && v.size() > *f.max_properties)) return false;
    std::vector<ObjectPart> parts = object_parts(f);
    for (const ObjectPart& p : parts) {
      if (p.required && p.required->is_array()) {
        for (const auto& r : *p.required) {
          if (r.is_string() && !v.contains(r.get<std::string>())) return false;
        }
      }
      if (p.property_names) {
        for (const auto& [k, unused] : v.items()) {
          auto ok = satisfies(SchemaJson(k), {{p.property_names, 0}}, depth + 1);
          if (!ok || !*ok) return ok;
        }
      }
    }
    for (const auto& [k, e] : v.items()) {
      bool declared = false;
      auto conj = property_schema(parts, k, &declared);
      if (!conj) return conj.status();
      auto ok = satisfies(e, *conj, depth + 1);
      if (!ok || !*ok) return ok;
    }
  } else if (v.is_array()) {
    if (v.size() < f.min_items || (f.max_items && v.size() > *f.max_items)) return false;
    std::vector<ArrayPart> parts = array_parts(f);
    for (size_t i = 0; i < v.size(); ++i) {
      Conjunction c;
      for (const ArrayPart& p : parts) {
        if (p.prefix && i < p.prefix->size()) {
          c.push_back({&(*p.prefix)[i], 0});
        } else if (p.tail) {
          c.push_back({p.tail, 0});
        }
      }
      auto ok = satisfies(v[i], c, depth + 1);
      if (!ok || !*ok) return ok;
    }
  }
  return true;
}

}  // namespace troupe::structured
