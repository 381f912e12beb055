// JSON schemas compiled for JsonMatcher: the subset of JSON Schema that a
// byte-at-a-time recognizer can enforce exactly (types, properties and
// required keys, additionalProperties, items and their counts, enum and
// const, and anyOf as a tagged union of objects: the form vLLM gives tool
// calls). Any other keyword is refused with its name, never ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::structured {

/// Value types a schema node accepts (bits).
enum SchemaType : uint8_t {
  kObject = 1,
  kArray = 2,
  kString = 4,
  kInteger = 8,
  kNumber = 16,  // any number, integers included
  kBoolean = 32,
  kNull = 64,
  kAnyType = 127,
};

struct SchemaNode {
  uint8_t types = kAnyType;
  /// Allowed values as compact JSON text (nlohmann's dump), sorted and unique; empty: any value of `types`.
  std::vector<std::string> enum_values;
  /// Declared properties: their keys as they appear between the quotes, and their nodes.
  std::vector<std::string> property_keys;
  std::vector<uint16_t> property_nodes;
  uint32_t required = 0;  // bit i: property i must appear
  /// The node of undeclared properties' values, or kNoNode when none is allowed.
  uint16_t additional = 0;
  uint16_t items = 0;  // the node of array items
  uint16_t min_items = 0;
  uint16_t max_items = UINT16_MAX;
  /// anyOf over objects told apart by one property with a single allowed value (a tag):
  /// this node has that property only; the matcher requires it first and its value picks
  /// the branch (property order is the generator's to choose, as xgrammar's schema order).
  std::vector<std::string> union_tags;   // the tags' values as compact JSON
  std::vector<uint16_t> union_branches;  // the object node of each tag
};

struct CompiledSchema {
  static constexpr uint16_t kAny = 0;        // nodes[0] accepts any JSON value
  static constexpr uint16_t kNoNode = UINT16_MAX;
  static constexpr size_t kMaxProperties = 32;
  /// Longest declared property name, as written in JSON (escapes included): the matcher
  /// keeps a key's bytes only this far, so a longer one could never be completed.
  static constexpr size_t kMaxKeyBytes = 128;
  std::vector<SchemaNode> nodes;
  uint16_t root = 0;
  uint64_t id = 0;  // unique per compiled schema: matchers' cache keys start with it
};

/// A JSON Schema (text) compiled; invalid_argument naming the keyword or value that is
/// not supported or wrong. The root must be an object or an array schema.
Result<std::shared_ptr<const CompiledSchema>> compile_json_schema(std::string_view schema_json);
/// OpenAI's json_object: any object.
std::shared_ptr<const CompiledSchema> json_object_schema();

}  // namespace troupe::structured
