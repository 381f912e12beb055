// What a conjunction of JSON Schema subschemas says about a value, merged:
// $ref and allOf are followed into the conjunction (so they merge with their
// siblings), anyOf/oneOf are left as choices for the compiler to distribute
// (oneOf is enforced as anyOf), and the keywords of each type are merged to
// their tightest form (types intersected, bounds tightened, patterns and
// formats collected). Object and array keywords stay with their subschemas
// (`parts`), since a property's schema depends on each part's properties,
// patternProperties and additionalProperties together.
//
// Keywords that cannot be enforced exactly (not, if/then/else, dependencies,
// uniqueItems, multipleOf, contains, unevaluated*, dynamic references) are
// errors naming them; annotations and unknown keywords are ignored (unknown
// ones logged at debug level).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/rank/structured/json_lexemes.hpp"
#include "runtime/rank/structured/json_schema_index.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

enum JsonType : uint8_t {
  kNullType = 1,
  kBooleanType = 2,
  kObjectType = 4,
  kArrayType = 8,
  kStringType = 16,
  kIntegerType = 32,
  kFractionType = 64,  // numbers that are not integers ("number" is both bits)
  kAllTypes = 127,
};

/// One subschema of a conjunction; `done` marks its anyOf (1) / oneOf (2) as already
/// distributed.
struct SchemaPart {
  const SchemaJson* node;
  uint8_t done = 0;
  bool operator==(const SchemaPart& o) const { return node == o.node && done == o.done; }
};
using Conjunction = std::vector<SchemaPart>;

/// The schemas `true` and `false`, for conjunctions built by the compiler.
const SchemaJson& true_schema();
const SchemaJson& false_schema();

struct SchemaFacts {
  bool never = false;  // no value matches (false, or contradictory keywords)
  uint8_t types = kAllTypes;
  bool has_enum = false;
  std::vector<const SchemaJson*> enum_values;  // with has_enum: the allowed values
  StringConstraints string;
  NumberConstraints number;  // number.integer unused: see types
  uint64_t min_properties = 0;
  std::optional<uint64_t> max_properties;
  uint64_t min_items = 0;
  std::optional<uint64_t> max_items;
  /// Every subschema in the conjunction (after $ref and allOf), in document order.
  std::vector<const SchemaJson*> parts;
  /// anyOf / oneOf still to distribute: the schema holding it and which (1 anyOf, 2 oneOf).
  struct Choice {
    const SchemaJson* node;
    uint8_t which;
  };
  std::vector<Choice> choices;
};

class SchemaFactsBuilder {
 public:
  /// legacy_refs: drafts 04, 06 and 07, where a schema with $ref is that reference alone
  /// (its other keywords are ignored, as those drafts say); later drafts apply both.
  SchemaFactsBuilder(const SchemaIndex& index, bool legacy_refs) : index_(index), legacy_refs_(legacy_refs) {}
  /// Sorts and deduplicates a conjunction (the compiler's memo key).
  Conjunction normalize(Conjunction c) const;
  Result<SchemaFacts> facts(const Conjunction& conj) const;

 private:
  Status add_keywords(const SchemaJson& node, SchemaFacts& f) const;

  const SchemaIndex& index_;
  bool legacy_refs_;
};

/// The document's $schema names draft 04, 06 or 07 (or 03).
bool uses_legacy_refs(const SchemaJson& root);

}  // namespace troupe::structured
