#include "bench/structured/maskbench_order.hpp"

#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace troupe::bench {
namespace {

using ojson = nlohmann::ordered_json;
using Schemas = std::vector<const ojson*>;

constexpr int kMaxDepth = 64;

// The schema a local reference ("#", "#/a/b") names, or null.
const ojson* resolve(const ojson& root, const std::string& ref) {
  if (ref == "#") return &root;
  if (ref.rfind("#/", 0) != 0) return nullptr;
  try {
    const ojson::json_pointer p(ref.substr(1));
    return root.contains(p) ? &root.at(p) : nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Whether a patternProperties key matches `key` (ECMAScript search); a pattern std::regex
// cannot read counts as matching, so its schema is still followed.
bool pattern_matches(const std::string& pattern, const std::string& key) {
  try {
    return std::regex_search(key, std::regex(pattern, std::regex::ECMAScript));
  } catch (const std::exception&) {
    return true;
  }
}

// How well a branch's schemas describe object `value`: its keys the branch declares,
// minus a large penalty per required key the value lacks.
int branch_score(const ojson& value, const Schemas& branch) {
  int score = 0;
  for (const ojson* s : branch) {
    if (auto p = s->find("properties"); p != s->end() && p->is_object())
      for (const auto& [k, sub] : p->items()) score += value.contains(k) ? 1 : 0;
    if (auto r = s->find("required"); r != s->end() && r->is_array())
      for (const auto& k : *r) score -= (k.is_string() && !value.contains(k.get<std::string>())) ? 1000 : 0;
  }
  return score;
}

// `s` and every schema it applies in place: its own keywords, its $ref, then allOf in
// order (the order the engine merges them); of anyOf and oneOf, for an object value the
// one branch that fits it best (the engine writes one branch's keys), else every branch.
void expand(const ojson& root, const ojson* s, const ojson& value, int depth, Schemas& out) {
  if (!s || !s->is_object() || depth > kMaxDepth) return;
  out.push_back(s);
  if (auto r = s->find("$ref"); r != s->end() && r->is_string()) expand(root, resolve(root, *r), value, depth + 1, out);
  if (auto a = s->find("allOf"); a != s->end() && a->is_array())
    for (const auto& sub : *a) expand(root, &sub, value, depth + 1, out);
  for (const char* key : {"anyOf", "oneOf"}) {
    auto a = s->find(key);
    if (a == s->end() || !a->is_array()) continue;
    if (!value.is_object()) {
      for (const auto& sub : *a) expand(root, &sub, value, depth + 1, out);
      continue;
    }
    Schemas best;
    int best_score = 0;
    for (const auto& sub : *a) {
      Schemas branch;
      expand(root, &sub, value, depth + 1, branch);
      const int score = branch_score(value, branch);
      if (best.empty() || score > best_score) best = std::move(branch), best_score = score;
    }
    out.insert(out.end(), best.begin(), best.end());
  }
}

ojson reorder(const ojson& value, const Schemas& schemas, const ojson& root, int depth) {
  if (depth > kMaxDepth) return value;
  Schemas all;
  for (const ojson* s : schemas) expand(root, s, value, 0, all);
  if (value.is_object()) {
    std::vector<std::pair<std::string, Schemas>> declared;  // in order
    auto slot = [&](const std::string& key) -> Schemas& {
      for (auto& [k, v] : declared)
        if (k == key) return v;
      declared.emplace_back(key, Schemas{});
      return declared.back().second;
    };
    for (const ojson* s : all)
      if (auto p = s->find("properties"); p != s->end() && p->is_object())
        for (const auto& [k, sub] : p->items()) slot(k).push_back(&sub);
    ojson out = ojson::object();
    for (const auto& [k, subs] : declared)
      if (auto v = value.find(k); v != value.end()) out[k] = reorder(*v, subs, root, depth + 1);
    for (const auto& [k, v] : value.items()) {
      if (out.contains(k)) continue;
      Schemas subs;
      for (const ojson* s : all) {
        if (auto a = s->find("additionalProperties"); a != s->end() && a->is_object()) subs.push_back(&*a);
        if (auto pp = s->find("patternProperties"); pp != s->end() && pp->is_object())
          for (const auto& [pattern, sub] : pp->items())
            if (pattern_matches(pattern, k)) subs.push_back(&sub);
      }
      out[k] = reorder(v, subs, root, depth + 1);
    }
    return out;
  }
  if (value.is_array()) {
    ojson out = ojson::array();
    for (size_t i = 0; i < value.size(); ++i) {
      Schemas subs;
      for (const ojson* s : all) {
        auto prefix = s->find("prefixItems");
        if (prefix != s->end() && prefix->is_array() && i < prefix->size()) {
          subs.push_back(&(*prefix)[i]);
          continue;
        }
        if (auto items = s->find("items"); items != s->end()) {
          if (items->is_object()) subs.push_back(&*items);
          else if (items->is_array() && i < items->size()) subs.push_back(&(*items)[i]);
        }
      }
      out.push_back(reorder(value[i], subs, root, depth + 1));
    }
    return out;
  }
  return value;
}

}  // namespace

ojson reorder_keys(const ojson& value, const ojson& schema, const ojson& root) {
  return reorder(value, Schemas{&schema}, root, 0);
}

}  // namespace troupe::bench
