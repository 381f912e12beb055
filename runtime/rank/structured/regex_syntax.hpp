// Regex text (the common syntax of ECMAScript, which JSON Schema's `pattern`
// uses, and Python's `re`, which vLLM's `regex` takes) parsed into a tree over
// code points, then lowered to a byte regex through a character encoder (plain
// UTF-8, or the encodings a character has inside a JSON string). What cannot be
// matched by a finite automaton or is not implemented (backreferences,
// lookaround, \b, \p{...}, inline flags, anchors inside the pattern) is an
// error naming it; lazy quantifiers match as greedy ones (the same language).
// \d and \w are ASCII and \s is ECMAScript's set in both dialects (Python's str
// patterns take Unicode digits and letters: a regex here never allows more).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rank/structured/codepoint_set.hpp"
#include "runtime/rank/structured/regex_expr.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

enum class RegexDialect { ecmascript, python };

struct RegexNode {
  enum class Kind : uint8_t { empty, chars, concat, alt, repeat, line_start, line_end };
  Kind kind = Kind::empty;
  CodepointSet chars;           // chars
  std::vector<RegexNode> kids;  // concat, alt: the parts; repeat: the one repeated
  uint32_t lo = 0, hi = 0;      // repeat (hi may be ExprStore::kUnbounded)
};

struct RegexLimits {
  uint32_t max_count = 100'000;  // largest {m,n} bound
  uint32_t max_depth = 200;      // nested groups
  bool dot_all = false;          // '.' matches line terminators too (flag s)
};

/// The tree of `pattern`; errors say what and where ("at offset N").
Result<RegexNode> parse_regex(std::string_view pattern, RegexDialect dialect, const RegexLimits& limits = {});

/// The set plus the other case of its ASCII letters (flag i).
CodepointSet fold_ascii_case(const CodepointSet& set);

/// Turns a set of code points into the byte regex of their encodings.
using CharEncoder = std::function<ExprId(const CodepointSet&)>;

/// The bytes the whole text must match (vLLM's regex, grammar terminals): `^` at the start
/// and `$` at the end are no-ops, anywhere else an error.
Result<ExprId> lower_full_match(ExprStore& store, const RegexNode& node, const CharEncoder& encode);
/// JSON Schema's search semantics: the text must contain a match; `^` / `$` at the start /
/// end of an alternative anchor it. `any` encodes the characters around the match.
Result<ExprId> lower_search(ExprStore& store, const RegexNode& node, const CharEncoder& encode,
                            const CodepointSet& any);

/// Plain UTF-8 encoding.
CharEncoder utf8_encoder(ExprStore& store);

}  // namespace troupe::structured
