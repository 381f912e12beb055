// The JSON Schema compiler's internals (json_schema_compiler.cpp: values,
// choices and literals; json_schema_objects.cpp; json_schema_arrays.cpp;
// json_schema_validate.cpp: checking literal values against a schema;
// json_schema_disjoint.cpp: proving oneOf branches disjoint).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/json_lexemes.hpp"
#include "runtime/rank/structured/json_schema_facts.hpp"
#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "runtime/rank/structured/json_schema_index.hpp"

namespace troupe::structured {

/// The whitespace around JSON punctuation the options allow (a regex that may match empty).
Result<ExprId> json_whitespace(ExprStore& store, const JsonSchemaOptions& options);

class SchemaCompiler {
 public:
  SchemaCompiler(const SchemaJson& root, ExprId whitespace, GrammarBuilder& builder);

  /// The rule of the values a conjunction of subschemas admits (memoised).
  Result<Symbol> value(Conjunction conj);

 private:
  // A subschema's object keywords.
  struct ObjectPart {
    const SchemaJson* properties = nullptr;
    const SchemaJson* pattern_properties = nullptr;
    const SchemaJson* additional = nullptr;
    const SchemaJson* property_names = nullptr;
    const SchemaJson* required = nullptr;
  };
  // A subschema's array keywords: the prefix schemas and the schema of later items.
  struct ArrayPart {
    const SchemaJson* prefix = nullptr;  // an array of schemas, or null
    const SchemaJson* tail = nullptr;    // null: any value
  };

  Status distribute(const Conjunction& conj, const SchemaFacts& f, Symbol rule);
  Status check_disjoint(const Conjunction& conj, const SchemaFacts::Choice& choice, const SchemaJson& branches);
  Result<std::vector<const SchemaJson*>> exclusive_required(const SchemaJson& branches);
  Status typed(const SchemaFacts& f, Symbol rule);
  Result<Symbol> literal(const SchemaJson& v);
  static std::vector<std::string> scalar_literal_texts(const SchemaJson& v);
  struct DeclaredProperty {
    Symbol key;
    Symbol value;
    bool required;
  };
  Result<Symbol> object(const SchemaFacts& f);
  Result<std::vector<std::string>> object_keys(const std::vector<ObjectPart>& parts, std::set<std::string>* required);
  Result<bool> declared_properties(const std::vector<ObjectPart>& parts, const std::vector<std::string>& keys,
                                   const std::set<std::string>& required, std::vector<DeclaredProperty>* out);
  Status extra_properties(const std::vector<ObjectPart>& parts, ExprId not_declared,
                          std::vector<std::pair<Symbol, Symbol>>* out);
  Result<Symbol> property_sequence(const std::vector<DeclaredProperty>& declared,
                                   const std::vector<std::pair<Symbol, Symbol>>& extras, uint64_t min,
                                   std::optional<uint64_t> max);
  Result<Symbol> array(const SchemaFacts& f);

  static std::vector<ObjectPart> object_parts(const SchemaFacts& f);
  static std::vector<ArrayPart> array_parts(const SchemaFacts& f);
  /// The conjunction a property named `key` must satisfy (properties, matching
  /// patternProperties, else additionalProperties, of every part); *declared: some part names it.
  Result<Conjunction> property_schema(const std::vector<ObjectPart>& parts, const std::string& key, bool* declared);
  /// The regex of key contents (no quotes) that propertyNames allows (all of them).
  Result<ExprId> property_names_content(const std::vector<ObjectPart>& parts);

  /// `value` matches the conjunction (enum filtering, propertyNames of declared keys).
  Result<bool> satisfies(const SchemaJson& value, const Conjunction& conj, int depth);
  /// member_of_enum: `value` is one of f's enum values (the enum check is skipped).
  Result<bool> satisfies_facts(const SchemaJson& value, const SchemaFacts& f, int depth, bool member_of_enum = false);
  /// No value matches both conjunctions, as far as json_schema_disjoint.cpp can prove.
  Result<bool> disjoint(const Conjunction& a, const Conjunction& b, int depth);
  /// ECMAScript `pattern` found in the raw string `text`.
  Result<bool> pattern_matches(const std::string& pattern, const std::string& text);

  GrammarBuilder& b_;
  ExprStore& s_;
  SchemaIndex index_;
  SchemaFactsBuilder facts_;
  JsonLexemes lex_;
  Symbol open_object_, close_object_, open_array_, close_array_, comma_;
  std::map<std::vector<std::pair<const SchemaJson*, uint8_t>>, Symbol> memo_;
  // Raw-text matching of patterns (not part of the grammar).
  ExprStore match_store_;
  std::unordered_map<std::string, ExprId> pattern_regex_;
  size_t disjoint_checks_ = 0;
  static constexpr int kMaxNesting = 300;  // schema values inside values (the stack's bound)
  int depth_ = 0;
  std::deque<SchemaJson> synthesized_;  // schemas the compiler writes (addresses stay put)
};

}  // namespace troupe::structured
