// The grammar engine's front ends other than JSON Schema (json_schema_grammar.hpp):
// vLLM's structured_outputs regex, choice, grammar (Lark or GBNF/EBNF) and
// structural_tag, each compiled to a Grammar.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

/// The whole output matches `pattern` (Python `re` syntax, full match; regex_syntax.hpp
/// lists what is refused).
Result<std::shared_ptr<const Grammar>> compile_regex_grammar(std::string_view pattern,
                                                             const GrammarLimits& limits = {});

/// The output is exactly one of the strings.
Result<std::shared_ptr<const Grammar>> compile_choice_grammar(const std::vector<std::string>& choices,
                                                              const GrammarLimits& limits = {});

/// A grammar as text, told apart as vLLM does: with "::=" it is GBNF/EBNF (llama.cpp's
/// and xgrammar's notation, start rule `root`), otherwise Lark (start rule `start`).
/// Errors give the line and column.
///
/// Lark's terminals (UPPERCASE names, string literals, /regexes/) are the lexemes, matched
/// longest first among those the parser allows next, as Lark's contextual lexer does.
/// GBNF has no terminals: rules that are not recursive are folded into regexes, and a
/// recursive rule's runs of such pieces are its lexemes (also matched longest first, so a
/// grammar whose pieces could run into each other may refuse text llama.cpp's
/// character-level matcher takes).
Result<std::shared_ptr<const Grammar>> compile_grammar_text(std::string_view text,
                                                            const GrammarLimits& limits = {});

/// vLLM's structural tag: {"type": "structural_tag", "structures": [{"begin": "...",
/// "schema": {...}, "end": "..."}], "triggers": ["..."]}. Free text until a trigger; a
/// trigger must start one of the structures' begin texts, followed by JSON the structure's
/// schema admits and its end text; then free text again. The output may end in free text.
Result<std::shared_ptr<const Grammar>> compile_structural_tag(std::string_view json,
                                                              const JsonSchemaOptions& options = {},
                                                              const GrammarLimits& limits = {});

}  // namespace troupe::structured
