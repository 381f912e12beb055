#include "runtime/rank/structured/json_schema_index.hpp"

#include <cctype>

namespace troupe::structured {
namespace {

constexpr int kMaxDepth = 256;

bool has_scheme(const std::string& s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (c == ':') return true;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return false;
  }
  return false;
}

std::string strip_fragment(const std::string& uri) {
  size_t hash = uri.find('#');
  return hash == std::string::npos ? uri : uri.substr(0, hash);
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Keywords whose value is one schema, a map of schemas, or an array of schemas.
bool is_single_schema_keyword(const std::string& k) {
  return k == "additionalProperties" || k == "additionalItems" || k == "items" || k == "not" || k == "if" ||
         k == "then" || k == "else" || k == "propertyNames" || k == "contains" || k == "unevaluatedProperties" ||
         k == "unevaluatedItems" || k == "contentSchema";
}
bool is_map_keyword(const std::string& k) {
  return k == "properties" || k == "patternProperties" || k == "definitions" || k == "$defs" ||
         k == "dependentSchemas" || k == "dependencies";
}
bool is_array_keyword(const std::string& k) {
  return k == "allOf" || k == "anyOf" || k == "oneOf" || k == "prefixItems" || k == "items";
}

}  // namespace

std::string resolve_uri(const std::string& base, const std::string& ref) {
  if (ref.empty()) return strip_fragment(base);
  if (has_scheme(ref)) return ref;
  if (ref[0] == '#') return strip_fragment(base) + ref;
  std::string b = strip_fragment(base);
  if (ref.rfind("//", 0) == 0) {
    size_t colon = b.find(':');
    return colon == std::string::npos ? ref : b.substr(0, colon + 1) + ref;
  }
  if (ref[0] == '/') {
    size_t auth = b.find("//");
    size_t path = auth == std::string::npos ? b.find('/') : b.find('/', auth + 2);
    return (path == std::string::npos ? b : b.substr(0, path)) + ref;
  }
  size_t slash = b.rfind('/');
  return (slash == std::string::npos ? std::string() : b.substr(0, slash + 1)) + ref;
}

SchemaIndex::SchemaIndex(const SchemaJson& root) : root_(root) {
  std::string base;
  if (root.is_object()) {
    auto id = root.find("$id");
    if (id == root.end()) id = root.find("id");
    if (id != root.end() && id->is_string()) base = strip_fragment(resolve_uri("", id->get<std::string>()));
  }
  by_uri_[base] = &root_;
  visit(root, base, 0);
}

void SchemaIndex::visit(const SchemaJson& node, const std::string& parent_base, int depth) {
  if (depth > kMaxDepth || order_.count(&node)) return;
  order_.emplace(&node, static_cast<uint32_t>(order_.size() + 1));
  std::string base = parent_base;
  if (node.is_object()) {
    auto id = node.find("$id");
    if (id == node.end() && node.find("$ref") == node.end()) id = node.find("id");
    if (id != node.end() && id->is_string()) {
      const std::string& text = id->get_ref<const std::string&>();
      if (!text.empty() && text[0] == '#') {
        by_uri_.emplace(strip_fragment(parent_base) + text, &node);  // a draft-06/07 plain-name anchor
      } else {
        std::string resolved = resolve_uri(parent_base, text);
        base = strip_fragment(resolved);
        by_uri_.emplace(base, &node);
        if (resolved.find('#') != std::string::npos && resolved.back() != '#') by_uri_.emplace(resolved, &node);
      }
    }
    auto anchor = node.find("$anchor");
    if (anchor != node.end() && anchor->is_string()) by_uri_.emplace(base + "#" + anchor->get<std::string>(), &node);
    auto dyn = node.find("$dynamicAnchor");
    if (dyn != node.end() && dyn->is_string()) by_uri_.emplace(base + "#" + dyn->get<std::string>(), &node);
  }
  base_of_.emplace(&node, base);
  visit_children(node, base, depth);
}

void SchemaIndex::visit_children(const SchemaJson& node, const std::string& base, int depth) {
  if (!node.is_object()) return;
  for (const auto& [k, v] : node.items()) {
    if (is_single_schema_keyword(k) && (v.is_object() || v.is_boolean())) {
      visit(v, base, depth + 1);
    } else if (is_map_keyword(k) && v.is_object()) {
      for (const auto& [name, sub] : v.items()) {
        if (sub.is_object() || sub.is_boolean()) visit(sub, base, depth + 1);
      }
    } else if (is_array_keyword(k) && v.is_array()) {
      for (const auto& sub : v) {
        if (sub.is_object() || sub.is_boolean()) visit(sub, base, depth + 1);
      }
    }
  }
}

uint32_t SchemaIndex::order(const SchemaJson* node) const {
  auto it = order_.find(node);
  return it == order_.end() ? 0 : it->second;
}

Result<const SchemaJson*> SchemaIndex::resolve(const SchemaJson* from, std::string_view ref_text) const {
  std::string ref(ref_text);
  auto b = base_of_.find(from);
  std::string target = resolve_uri(b == base_of_.end() ? std::string() : b->second, ref);
  size_t hash = target.find('#');
  std::string doc = hash == std::string::npos ? target : target.substr(0, hash);
  std::string fragment = hash == std::string::npos ? "" : percent_decode(target.substr(hash + 1));
  auto d = by_uri_.find(doc);
  if (d == by_uri_.end()) {
    return invalid_argument("$ref \"" + ref + "\": a reference to another document is not supported");
  }
  if (fragment.empty()) return d->second;
  if (fragment[0] != '/') {
    auto a = by_uri_.find(doc + "#" + fragment);
    if (a == by_uri_.end()) return invalid_argument("$ref \"" + ref + "\": no anchor \"" + fragment + "\"");
    return a->second;
  }
  const SchemaJson* node = d->second;
  size_t pos = 1;
  while (pos <= fragment.size()) {
    size_t next = fragment.find('/', pos);
    if (next == std::string::npos) next = fragment.size();
    std::string token = fragment.substr(pos, next - pos);
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key += token[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        key += token[i];
      }
    }
    if (node->is_object()) {
      auto it = node->find(key);
      if (it == node->end()) return invalid_argument("$ref \"" + ref + "\": nothing at \"" + key + "\"");
      node = &*it;
    } else if (node->is_array()) {
      char* end = nullptr;
      unsigned long i = std::strtoul(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || i >= node->size()) {
        return invalid_argument("$ref \"" + ref + "\": no item \"" + key + "\"");
      }
      node = &(*node)[i];
    } else {
      return invalid_argument("$ref \"" + ref + "\": nothing at \"" + key + "\"");
    }
    pos = next + 1;
  }
  return node;
}

}  // namespace troupe::structured
