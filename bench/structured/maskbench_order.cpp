#include "bench/structured/maskbench_order.hpp"

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

// `s` and every schema it applies in place ($ref, allOf, anyOf, oneOf), in document order.
void expand(const ojson& root, const ojson* s, int depth, Schemas& out) {
  if (!s || !s->is_object() || depth > kMaxDepth) return;
  out.push_back(s);
  if (auto r = s->find("$ref"); r != s->end() && r->is_string()) expand(root, resolve(root, *r), depth + 1, out);
  for (const char* key : {"allOf", "anyOf", "oneOf"})
    if (auto a = s->find(key); a != s->end() && a->is_array())
      for (const auto& sub : *a) expand(root, &sub, depth + 1, out);
}

ojson reorder(const ojson& value, const Schemas& schemas, const ojson& root, int depth) {
  if (depth > kMaxDepth) return value;
  Schemas all;
  for (const ojson* s : schemas) expand(root, s, 0, all);
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
      for (const ojson* s : all)
        if (auto a = s->find("additionalProperties"); a != s->end() && a->is_object()) subs.push_back(&*a);
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
