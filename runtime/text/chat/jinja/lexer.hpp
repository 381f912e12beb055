// Jinja's lexer, configured as Hugging Face transformers configures jinja2:
// trim_blocks and lstrip_blocks on, keep_trailing_newline off, newlines
// normalized to "\n". Whitespace control ({%- -%}, {{- -}}, {%+ +%}) and
// comments are resolved here, so the parser sees text and expression tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja {

struct Token {
  enum class Type { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Type type;
  std::string value;  // text, name, decoded string, number digits or operator
  int line = 1;
};

/// Tokenizes a template; a malformed one is an Error naming the line.
std::vector<Token> tokenize(std::string_view source);

}  // namespace troupe::jinja
