// Grammars written as text (GBNF/EBNF and Lark) parsed into one tree form,
// which grammar_lowering.hpp turns into lexemes and rules. Every node keeps the
// line and column it was read at, so an error names where it is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rank/structured/codepoint_set.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

struct TextPosition {
  uint32_t line = 1, column = 1;
};

struct GrammarNode {
  enum class Kind : uint8_t {
    literal,      // text (UTF-8); fold_case: ASCII letters in either case
    chars,        // one character of a set
    regex,        // a regex (Python syntax) with flags
    ref,          // a rule or terminal by name
    json_schema,  // Lark %json {...}: a JSON value the schema admits
    seq,
    alt,
    repeat,       // kids[0]{lo,hi}
  };
  Kind kind = Kind::seq;
  std::string text;  // literal; regex source; ref name; json schema text
  std::string flags; // regex flags (i, s)
  bool fold_case = false;
  CodepointSet chars;
  std::vector<GrammarNode> kids;
  uint32_t lo = 0, hi = 0;  // repeat; hi may be kUnbounded
  TextPosition at;
};

struct GrammarRuleText {
  std::string name;
  GrammarNode body;
  TextPosition at;
  bool terminal = false;  // Lark: an uppercase name, a lexeme
};

struct GrammarText {
  std::vector<GrammarRuleText> rules;
  std::vector<GrammarNode> ignore;  // Lark %ignore
  std::string start;                // the start rule's name
  bool lark = false;
};

/// Line and column of an offset in text (1-based).
TextPosition position_of(std::string_view text, size_t offset);
/// "line L, column C: message" as invalid_argument.
Status grammar_error(const TextPosition& at, const std::string& message);

/// GBNF (llama.cpp) / EBNF (xgrammar): `name ::= ...`, start rule `root`.
Result<GrammarText> parse_gbnf(std::string_view text);
/// Lark (as llguidance takes it): `start: ...`, rules lowercase, terminals UPPERCASE.
Result<GrammarText> parse_lark(std::string_view text);

}  // namespace troupe::structured
