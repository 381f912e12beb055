// A JSON Schema document's subschemas by location: each subschema's base URI
// ($id / draft-04 id, resolved against its parent's), the documents and anchors
// it declares ($id, $anchor, draft-06/07 "#name" ids), and a document-order
// number (so merged properties keep the order the schema writes them). $ref
// resolves against the base URI of the schema holding it: JSON pointers (with
// ~0 ~1 and percent escapes) and anchors inside this document; a reference to
// another document is an error naming it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "troupe/status.hpp"

namespace troupe::structured {

using SchemaJson = nlohmann::ordered_json;

class SchemaIndex {
 public:
  explicit SchemaIndex(const SchemaJson& root);

  const SchemaJson& root() const { return root_; }
  /// The schema `ref` names, from the schema `from` (which holds the $ref).
  Result<const SchemaJson*> resolve(const SchemaJson* from, std::string_view ref) const;
  /// Position in document order (0 for schemas outside the index, e.g. literals).
  uint32_t order(const SchemaJson* node) const;

 private:
  void visit(const SchemaJson& node, const std::string& base, int depth);
  void visit_children(const SchemaJson& node, const std::string& base, int depth);

  const SchemaJson& root_;
  std::unordered_map<const SchemaJson*, std::string> base_of_;
  std::unordered_map<const SchemaJson*, uint32_t> order_;
  std::unordered_map<std::string, const SchemaJson*> by_uri_;  // "doc" and "doc#anchor"
};

/// RFC 3986 reference resolution (enough for $id and $ref): `ref` against `base`.
std::string resolve_uri(const std::string& base, const std::string& ref);

}  // namespace troupe::structured
