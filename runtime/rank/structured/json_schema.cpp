#include "runtime/rank/structured/json_schema.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <set>

namespace troupe::structured {
namespace {

using json = nlohmann::json;

constexpr int kMaxSchemaDepth = 32;

uint64_t next_schema_id() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

// Keywords that only describe: they do not constrain the value.
const std::set<std::string> kAnnotations = {"title", "description", "$schema", "$id", "default", "examples",
                                            "$comment", "deprecated", "readOnly", "writeOnly"};

Result<uint8_t> parse_type(const json& t) {
  auto one = [](const json& name) -> Result<uint8_t> {
    if (!name.is_string()) return invalid_argument("json_schema: 'type' must be a string or a list of strings");
    const std::string s = name.get<std::string>();
    if (s == "object") return static_cast<uint8_t>(kObject);
    if (s == "array") return static_cast<uint8_t>(kArray);
    if (s == "string") return static_cast<uint8_t>(kString);
    if (s == "integer") return static_cast<uint8_t>(kInteger);
    if (s == "number") return static_cast<uint8_t>(kNumber | kInteger);
    if (s == "boolean") return static_cast<uint8_t>(kBoolean);
    if (s == "null") return static_cast<uint8_t>(kNull);
    return invalid_argument("json_schema: unknown type '" + s + "'");
  };
  if (!t.is_array()) return one(t);
  if (t.empty()) return invalid_argument("json_schema: 'type' must not be an empty list");
  uint8_t bits = 0;
  for (const auto& name : t) {
    auto b = one(name);
    if (!b) return b.status();
    bits |= *b;
  }
  return bits;
}

Result<uint16_t> count(const json& v, const char* key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 65535)
    return invalid_argument(std::string("json_schema: '") + key + "' must be an integer in [0, 65535]");
  return static_cast<uint16_t>(v.get<int64_t>());
}

class Compiler {
 public:
  explicit Compiler(CompiledSchema* out) : out_(out) {}

  Result<uint16_t> node(const json& s, int depth) {
    if (depth > kMaxSchemaDepth) return invalid_argument("json_schema: nested deeper than 32 levels");
    if (s.is_boolean()) {
      if (s.get<bool>()) return CompiledSchema::kAny;
      return invalid_argument("json_schema: the schema 'false' (no value at all) is not supported");
    }
    if (!s.is_object()) return invalid_argument("json_schema: a schema must be an object or a boolean");
    if (out_->nodes.size() >= 4096) return invalid_argument("json_schema: more than 4096 schemas");
    const size_t index = out_->nodes.size();
    out_->nodes.emplace_back();
    SchemaNode n;
    for (const auto& [key, v] : s.items()) {
      if (kAnnotations.count(key)) continue;
      if (key == "type") {
        auto t = parse_type(v);
        if (!t) return t.status();
        n.types = *t;
      } else if (key == "enum" || key == "const") {
        if (key == "enum" && (!v.is_array() || v.empty()))
          return invalid_argument("json_schema: 'enum' must be a non-empty list");
        for (const auto& value : key == "enum" ? v : json::array({v})) n.enum_values.push_back(value.dump());
        // Sorted and unique: the values sharing a prefix are then one range, which the
        // matcher finds by binary search (a 69k-value enum costs log n per byte, not n).
        std::sort(n.enum_values.begin(), n.enum_values.end());
        n.enum_values.erase(std::unique(n.enum_values.begin(), n.enum_values.end()), n.enum_values.end());
      } else if (key == "properties") {
        if (!v.is_object()) return invalid_argument("json_schema: 'properties' must be an object");
        if (v.size() > CompiledSchema::kMaxProperties)
          return invalid_argument("json_schema: more than 32 properties in one object");
        for (const auto& [name, sub] : v.items()) {
          const std::string quoted = json(name).dump();
          if (quoted.size() - 2 > CompiledSchema::kMaxKeyBytes)
            return invalid_argument("json_schema: property name '" + quoted.substr(1, 40) + "...' is " +
                                    std::to_string(quoted.size() - 2) + " bytes long; at most " +
                                    std::to_string(CompiledSchema::kMaxKeyBytes) + " are supported");
          n.property_keys.push_back(quoted.substr(1, quoted.size() - 2));
          auto child = node(sub, depth + 1);
          if (!child) return child.status();
          n.property_nodes.push_back(*child);
        }
      } else if (key == "additionalProperties") {
        if (v.is_boolean() && !v.get<bool>()) {
          n.additional = CompiledSchema::kNoNode;
        } else {
          auto child = node(v, depth + 1);
          if (!child) return child.status();
          n.additional = *child;
        }
      } else if (key == "items") {
        auto child = node(v, depth + 1);
        if (!child) return child.status();
        n.items = *child;
      } else if (key == "minItems" || key == "maxItems") {
        auto c = count(v, key.c_str());
        if (!c) return c.status();
        (key == "minItems" ? n.min_items : n.max_items) = *c;
      } else if (key == "anyOf") {
        auto u = tagged_union(v, depth, &n);
        if (!u.ok()) return u;
      } else if (key != "required") {
        return invalid_argument("json_schema: keyword '" + key + "' is not implemented in troupe yet");
      }
    }
    if (const auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) return invalid_argument("json_schema: 'required' must be a list of property names");
      for (const auto& name : *r) {
        if (!name.is_string()) return invalid_argument("json_schema: 'required' must be a list of property names");
        const std::string quoted = json(name.get<std::string>()).dump();
        const std::string key = quoted.substr(1, quoted.size() - 2);
        size_t i = 0;
        while (i < n.property_keys.size() && n.property_keys[i] != key) ++i;
        if (i == n.property_keys.size())
          return invalid_argument("json_schema: required property '" + name.get<std::string>() +
                                  "' is not in 'properties'");
        n.required |= uint32_t{1} << i;
      }
    }
    if (n.min_items > n.max_items) return invalid_argument("json_schema: minItems is larger than maxItems");
    if (!n.union_tags.empty() && (n.property_keys.size() != 1 || !n.enum_values.empty() || n.items != 0))
      return invalid_argument("json_schema: anyOf may not be combined with properties, enum, const or items");
    out_->nodes[index] = std::move(n);
    return static_cast<uint16_t>(index);
  }

 private:
  // anyOf whose branches are objects that share a required property with one allowed value
  // each (distinct): the node becomes the union (see SchemaNode::union_tags).
  Status tagged_union(const json& branches, int depth, SchemaNode* n) {
    const Status unsupported = invalid_argument(
        "json_schema: anyOf is only implemented as a list of objects told apart by a required property with "
        "one allowed value each (a const or a one-value enum)");
    if (!branches.is_array() || branches.empty() || branches.size() > 256) return unsupported;
    if (!n->property_keys.empty()) return unsupported;
    std::vector<uint16_t> nodes;
    for (const auto& b : branches) {
      auto child = node(b, depth + 1);
      if (!child) return child.status();
      SchemaNode& c = out_->nodes[*child];
      if (!(c.types & kObject) || c.property_keys.empty()) return unsupported;
      c.types = kObject;
      // A branch is the whole object (as vLLM's xgrammar, which disallows undeclared
      // properties by default): a second tag could otherwise name another branch.
      c.additional = CompiledSchema::kNoNode;
      nodes.push_back(*child);
    }
    // The tag: the first property of the first branch that every branch requires with one value.
    const SchemaNode& first = out_->nodes[nodes[0]];
    for (size_t k = 0; k < first.property_keys.size(); ++k) {
      const std::string tag = first.property_keys[k];  // a copy: nodes grows below
      std::vector<std::string> values;
      for (uint16_t b : nodes) {
        const SchemaNode& c = out_->nodes[b];
        size_t i = 0;
        while (i < c.property_keys.size() && c.property_keys[i] != tag) ++i;
        if (i == c.property_keys.size() || !(c.required >> i & 1)) break;
        const SchemaNode& t = out_->nodes[c.property_nodes[i]];
        if (t.enum_values.size() != 1) break;
        if (std::find(values.begin(), values.end(), t.enum_values[0]) != values.end()) break;
        values.push_back(t.enum_values[0]);
      }
      if (values.size() != nodes.size()) continue;
      if (out_->nodes.size() >= 4096) return invalid_argument("json_schema: more than 4096 schemas");
      SchemaNode tag_node;
      tag_node.enum_values = values;
      std::sort(tag_node.enum_values.begin(), tag_node.enum_values.end());  // the matcher's order
      out_->nodes.push_back(tag_node);
      n->types = kObject;
      n->property_keys = {tag};
      n->property_nodes = {static_cast<uint16_t>(out_->nodes.size() - 1)};
      n->required = 1;
      n->additional = CompiledSchema::kNoNode;
      n->union_tags = std::move(values);
      n->union_branches = std::move(nodes);
      return Status{};
    }
    return unsupported;
  }

  CompiledSchema* out_;
};

}  // namespace

Result<std::shared_ptr<const CompiledSchema>> compile_json_schema(std::string_view schema_json) {
  const json s = json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (s.is_discarded()) return invalid_argument("json_schema: the schema is not valid JSON");
  auto out = std::make_shared<CompiledSchema>();
  out->nodes.emplace_back();  // kAny
  Compiler c(out.get());
  auto root = c.node(s, 0);
  if (!root) return root.status();
  const SchemaNode& r = out->nodes[*root];
  if ((r.types != kObject && r.types != kArray) || !r.enum_values.empty())
    return invalid_argument("json_schema: the root schema must be of type 'object' or 'array'");
  out->root = *root;
  out->id = next_schema_id();
  return std::shared_ptr<const CompiledSchema>(std::move(out));
}

std::shared_ptr<const CompiledSchema> json_object_schema() {
  static const std::shared_ptr<const CompiledSchema> schema = [] {
    auto s = std::make_shared<CompiledSchema>();
    s->nodes.emplace_back();  // kAny
    SchemaNode root;
    root.types = kObject;
    s->nodes.push_back(root);
    s->root = 1;
    s->id = next_schema_id();
    return std::shared_ptr<const CompiledSchema>(std::move(s));
  }();
  return schema;
}

}  // namespace troupe::structured
