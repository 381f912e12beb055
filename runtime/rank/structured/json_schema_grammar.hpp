// JSON Schema compiled to a grammar (the JSON Schema front end of the grammar
// engine). Drafts 04, 06, 07, 2019-09 and 2020-12 spellings are read:
//   $ref (JSON pointers, $id / $anchor in the document; recursion), $defs /
//   definitions; allOf merged with its siblings; anyOf and oneOf (oneOf is
//   enforced as anyOf: a value matching two branches is accepted); type (and
//   type lists), enum, const; properties (in their written order; required
//   ones must appear, optional ones may be left out), required,
//   additionalProperties, patternProperties (a key matching two patterns is
//   refused), propertyNames, min/maxProperties; items (schema or array form),
//   prefixItems, additionalItems, min/maxItems; min/maxLength (in characters),
//   pattern (ECMAScript, search semantics), format (json_formats.hpp);
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (draft-04 flags too),
//   exactly for integers and for decimal numbers (a bounded number is written
//   without an exponent).
// Keys not declared come after the declared ones. Refused, naming the
// keyword: not, if/then/else, dependencies, dependentSchemas, uniqueItems,
// multipleOf, contains, unevaluated*, $dynamicRef, references to other
// documents. Annotations and unknown keywords are ignored.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/rank/structured/grammar.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

struct JsonSchemaOptions {
  /// vLLM's disable_any_whitespace: compact JSON only.
  bool compact = false;
  /// vLLM's whitespace_pattern: the regex (Python syntax) of the whitespace around
  /// punctuation, instead of the default.
  std::optional<std::string> whitespace_pattern;
  /// The default whitespace: runs of space, tab, CR and LF of at most this many bytes, so a
  /// model cannot pad forever.
  uint32_t max_whitespace = 20;
};

/// The grammar of the JSON values `schema_json` (JSON text) admits; invalid_argument
/// naming the keyword or the limit (time, memory) otherwise.
Result<std::shared_ptr<const Grammar>> compile_json_schema_grammar(std::string_view schema_json,
                                                                   const JsonSchemaOptions& options = {},
                                                                   const GrammarLimits& limits = {});

}  // namespace troupe::structured
