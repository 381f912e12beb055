#include "runtime/rank/structured/json_schema_facts.hpp"

#include <algorithm>
#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "runtime/rank/structured/json_formats.hpp"
#include "troupe/log.hpp"

namespace troupe::structured {
namespace {

constexpr size_t kMaxExpansion = 10'000;  // subschemas one conjunction may expand to

const std::unordered_set<std::string>& annotations() {
  static const std::unordered_set<std::string> k = {
      "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$comment", "$defs", "definitions",
      "title", "description", "default", "examples", "example", "deprecated", "readOnly", "writeOnly",
      "contentEncoding", "contentMediaType", "contentSchema", "$vocabulary",
      // applied by the expansion or the compiler, not here
      "$ref", "allOf", "anyOf", "oneOf", "properties", "patternProperties", "additionalProperties", "required",
      "propertyNames", "items", "prefixItems", "additionalItems"};
  return k;
}

Status refuse(const std::string& keyword, const std::string& why) {
  return invalid_argument("JSON Schema keyword '" + keyword + "' is not supported: " + why);
}

std::optional<Decimal> decimal_of(const SchemaJson& v) {
  if (v.is_number_unsigned()) return Decimal::parse(std::to_string(v.get<uint64_t>()));
  if (v.is_number_integer()) return Decimal::parse(std::to_string(v.get<int64_t>()));
  if (v.is_number_float()) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v.get<double>());
    return Decimal::parse(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
  }
  return std::nullopt;
}

std::optional<uint64_t> count_of(const SchemaJson& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() == static_cast<double>(static_cast<uint64_t>(v.get<double>()))) {
    return static_cast<uint64_t>(v.get<double>());
  }
  return std::nullopt;
}

void tighten_lower(std::optional<NumberBound>& cur, const NumberBound& b) {
  int c = cur ? b.value.compare(cur->value) : 1;
  if (!cur || c > 0 || (c == 0 && b.exclusive)) cur = b;
}

void tighten_upper(std::optional<NumberBound>& cur, const NumberBound& b) {
  int c = cur ? b.value.compare(cur->value) : -1;
  if (!cur || c < 0 || (c == 0 && b.exclusive)) cur = b;
}

Result<uint8_t> type_bits(const SchemaJson& t) {
  auto one = [](const std::string& name) -> int {
    if (name == "null") return kNullType;
    if (name == "boolean") return kBooleanType;
    if (name == "object") return kObjectType;
    if (name == "array") return kArrayType;
    if (name == "string") return kStringType;
    if (name == "integer") return kIntegerType;
    if (name == "number") return kIntegerType | kFractionType;
    return -1;
  };
  uint8_t bits = 0;
  if (t.is_string()) {
    int b = one(t.get<std::string>());
    if (b < 0) return invalid_argument("JSON Schema: unknown type \"" + t.get<std::string>() + "\"");
    return static_cast<uint8_t>(b);
  }
  if (!t.is_array()) return invalid_argument("JSON Schema: 'type' must be a string or an array of strings");
  for (const auto& e : t) {
    if (!e.is_string()) return invalid_argument("JSON Schema: 'type' must be a string or an array of strings");
    int b = one(e.get<std::string>());
    if (b < 0) return invalid_argument("JSON Schema: unknown type \"" + e.get<std::string>() + "\"");
    bits |= static_cast<uint8_t>(b);
  }
  return bits;
}

// A value's text with a top-level number in one spelling (JSON Schema compares 1 and 1.0
// as equal), for hashing enum values.
std::string enum_key(const SchemaJson& v) {
  if (v.is_number()) {
    auto d = decimal_of(v);
    if (d) {
      std::string key(1, 'n');
      key += d->to_string();
      return key;
    }
  }
  return v.dump();
}

void intersect_enum(SchemaFacts& f, const std::vector<const SchemaJson*>& values) {
  if (!f.has_enum) {
    f.has_enum = true;
    f.enum_values = values;
    return;
  }
  std::unordered_set<std::string> other;
  for (const SchemaJson* w : values) other.insert(enum_key(*w));
  std::vector<const SchemaJson*> kept;
  for (const SchemaJson* v : f.enum_values) {
    if (other.count(enum_key(*v))) kept.push_back(v);
  }
  f.enum_values = kept;
}

Status count_keyword(const SchemaJson& v, const char* name, uint64_t* min_slot, std::optional<uint64_t>* max_slot) {
  auto n = count_of(v);
  if (!n) return invalid_argument(std::string("JSON Schema: '") + name + "' must be a non-negative integer");
  if (min_slot) *min_slot = std::max(*min_slot, *n);
  if (max_slot) *max_slot = *max_slot ? std::min(**max_slot, *n) : *n;
  return {};
}

}  // namespace

bool uses_legacy_refs(const SchemaJson& root) {
  if (!root.is_object()) return false;
  auto it = root.find("$schema");
  if (it == root.end() || !it->is_string()) return false;
  const std::string& uri = it->get_ref<const std::string&>();
  for (const char* draft : {"draft-03", "draft-04", "draft-06", "draft-07"}) {
    if (uri.find(draft) != std::string::npos) return true;
  }
  return false;
}

const SchemaJson& true_schema() {
  static const SchemaJson t = true;
  return t;
}

const SchemaJson& false_schema() {
  static const SchemaJson f = false;
  return f;
}

Conjunction SchemaFactsBuilder::normalize(Conjunction c) const {
  std::sort(c.begin(), c.end(), [&](const SchemaPart& a, const SchemaPart& b) {
    uint32_t oa = index_.order(a.node), ob = index_.order(b.node);
    if (oa != ob) return oa < ob;
    if (a.node != b.node) return a.node < b.node;
    return a.done < b.done;
  });
  // One entry per node, its done bits merged.
  Conjunction out;
  for (const SchemaPart& p : c) {
    if (!out.empty() && out.back().node == p.node) {
      out.back().done |= p.done;
    } else if (p.node != &true_schema() || c.size() == 1) {
      out.push_back(p);
    }
  }
  if (out.empty()) out.push_back({&true_schema(), 0});
  return out;
}

Status SchemaFactsBuilder::add_keywords(const SchemaJson& node, SchemaFacts& f) const {
  if (node.is_boolean()) {
    if (!node.get<bool>()) f.never = true;
    return {};
  }
  if (!node.is_object()) return invalid_argument("JSON Schema: a schema must be an object or a boolean");
  std::optional<Decimal> minimum, maximum;
  bool exclusive_min_flag = false, exclusive_max_flag = false;
  for (const auto& [k, v] : node.items()) {
    if (k == "type") {
      auto bits = type_bits(v);
      if (!bits) return bits.status();
      f.types &= *bits;
    } else if (k == "enum") {
      if (!v.is_array()) return invalid_argument("JSON Schema: 'enum' must be an array");
      std::vector<const SchemaJson*> values;
      for (const auto& e : v) values.push_back(&e);
      intersect_enum(f, values);
    } else if (k == "const") {
      intersect_enum(f, {&v});
    } else if (k == "minLength" || k == "maxLength") {
      TROUPE_RETURN_IF_ERROR(count_keyword(v, k.c_str(), k == "minLength" ? &f.string.min_length : nullptr,
                                           k == "maxLength" ? &f.string.max_length : nullptr));
    } else if (k == "pattern") {
      if (!v.is_string()) return invalid_argument("JSON Schema: 'pattern' must be a string");
      f.string.patterns.push_back(v.get<std::string>());
    } else if (k == "format") {
      if (!v.is_string()) return invalid_argument("JSON Schema: 'format' must be a string");
      if (!format_patterns(v.get<std::string>()).empty()) {
        f.string.formats.push_back(v.get<std::string>());
      } else if (is_unenforced_standard_format(v.get<std::string>())) {
        return refuse("format", "format \"" + v.get<std::string>() + "\" is not implemented");
      } else {
        TROUPE_LOG_DEBUG("JSON Schema: format \"{}\" is an annotation here (not enforced)", v.get<std::string>());
      }
    } else if (k == "minimum" || k == "maximum") {
      auto d = decimal_of(v);
      if (!d) return invalid_argument("JSON Schema: '" + k + "' must be a number");
      (k == "minimum" ? minimum : maximum) = *d;
    } else if (k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      bool is_min = k == "exclusiveMinimum";
      if (v.is_boolean()) {  // draft 04: a flag on minimum / maximum
        (is_min ? exclusive_min_flag : exclusive_max_flag) = v.get<bool>();
      } else {
        auto d = decimal_of(v);
        if (!d) return invalid_argument("JSON Schema: '" + k + "' must be a number or a boolean");
        if (is_min) {
          tighten_lower(f.number.lower, NumberBound{*d, true});
        } else {
          tighten_upper(f.number.upper, NumberBound{*d, true});
        }
      }
    } else if (k == "minProperties" || k == "maxProperties") {
      TROUPE_RETURN_IF_ERROR(count_keyword(v, k.c_str(), k == "minProperties" ? &f.min_properties : nullptr,
                                           k == "maxProperties" ? &f.max_properties : nullptr));
    } else if (k == "minItems" || k == "maxItems") {
      TROUPE_RETURN_IF_ERROR(count_keyword(v, k.c_str(), k == "minItems" ? &f.min_items : nullptr,
                                           k == "maxItems" ? &f.max_items : nullptr));
    } else if (k == "not") {
      if (v.is_boolean() ? v.get<bool>() : (v.is_object() && v.empty())) {
        f.never = true;  // not {} / not true: nothing matches
      } else if (!(v.is_boolean() && !v.get<bool>())) {
        return refuse("not", "a negated schema cannot be enforced exactly");
      }
    } else if (k == "if") {
      if (node.contains("then") || node.contains("else")) return refuse("if", "conditional schemas cannot be enforced exactly");
    } else if (k == "dependencies" || k == "dependentSchemas" || k == "dependentRequired") {
      if (!v.is_object() || !v.empty()) return refuse(k, "dependent constraints cannot be enforced exactly");
    } else if (k == "uniqueItems") {
      if (!v.is_boolean()) return invalid_argument("JSON Schema: 'uniqueItems' must be a boolean");
      if (v.get<bool>()) return refuse("uniqueItems", "unique items cannot be enforced by a grammar");
    } else if (k == "multipleOf") {
      return refuse("multipleOf", "multiples cannot be enforced exactly");
    } else if (k == "contains" || k == "minContains" || k == "maxContains") {
      return refuse(k, "contains is not implemented");
    } else if (k == "unevaluatedProperties" || k == "unevaluatedItems") {
      if (!(v.is_boolean() && v.get<bool>())) return refuse(k, "unevaluated locations are not tracked");
    } else if (k == "$dynamicRef" || k == "$recursiveRef") {
      return refuse(k, "dynamic references are not supported");
    } else if (k == "then" || k == "else") {
      // without "if" they do nothing
    } else if (!annotations().count(k)) {
      TROUPE_LOG_DEBUG("JSON Schema: unknown keyword '{}' ignored", k);
    }
  }
  if (minimum) tighten_lower(f.number.lower, NumberBound{*minimum, exclusive_min_flag});
  if (maximum) tighten_upper(f.number.upper, NumberBound{*maximum, exclusive_max_flag});
  return {};
}

Result<SchemaFacts> SchemaFactsBuilder::facts(const Conjunction& conj) const {
  SchemaFacts f;
  // Expand $ref and allOf depth-first; a schema reached twice is the same conjunct.
  std::unordered_map<const SchemaJson*, uint8_t> done;
  std::vector<const SchemaJson*> order;
  std::vector<SchemaPart> stack(conj.rbegin(), conj.rend());
  while (!stack.empty()) {
    SchemaPart p = stack.back();
    stack.pop_back();
    auto [it, fresh] = done.emplace(p.node, p.done);
    if (!fresh) {
      it->second |= p.done;
      continue;
    }
    if (order.size() >= kMaxExpansion) {
      return invalid_argument("JSON Schema: one value's schema expands to more than " + std::to_string(kMaxExpansion) +
                              " subschemas ($ref / allOf)");
    }
    std::vector<SchemaPart> children;
    if (p.node->is_object()) {
      if (auto ref = p.node->find("$ref"); ref != p.node->end()) {
        if (!ref->is_string()) return invalid_argument("JSON Schema: '$ref' must be a string");
        auto target = index_.resolve(p.node, ref->get<std::string>());
        if (!target) return target.status();
        if (legacy_refs_) {  // the reference alone: its siblings are ignored
          stack.push_back({*target, 0});
          continue;
        }
        children.push_back({*target, 0});
      }
    }
    order.push_back(p.node);
    if (!p.node->is_object()) continue;
    if (auto all = p.node->find("allOf"); all != p.node->end()) {
      if (!all->is_array()) return invalid_argument("JSON Schema: 'allOf' must be an array");
      for (const auto& sub : *all) children.push_back({&sub, 0});
    }
    for (auto c = children.rbegin(); c != children.rend(); ++c) stack.push_back(*c);
  }
  // Merged properties come in the order the conjuncts are reached: a schema's own keywords,
  // then its $ref, then allOf[0] (followed through its references) before allOf[1]. Not the
  // document order: definitions are often written after the ones that use them.
  for (const SchemaJson* node : order) {
    TROUPE_RETURN_IF_ERROR(add_keywords(*node, f));
    f.parts.push_back(node);
    if (!node->is_object()) continue;
    const uint8_t skip = done[node];
    for (uint8_t which : {uint8_t{1}, uint8_t{2}}) {
      auto it = node->find(which == 1 ? "anyOf" : "oneOf");
      if (it == node->end() || (skip & which)) continue;
      if (!it->is_array() || it->empty()) {
        return invalid_argument(std::string("JSON Schema: '") + (which == 1 ? "anyOf" : "oneOf") +
                                "' must be a non-empty array");
      }
      f.choices.push_back({node, which});
    }
  }
  if (f.types == 0) f.never = true;
  if (f.has_enum && f.enum_values.empty()) f.never = true;
  return f;
}

}  // namespace troupe::structured
