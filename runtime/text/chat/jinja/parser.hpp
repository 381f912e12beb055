// Jinja's parser: tokens to statements, with jinja2's operator precedence.
#pragma once

#include <vector>

#include "runtime/text/chat/jinja/ast.hpp"
#include "runtime/text/chat/jinja/lexer.hpp"

namespace troupe::jinja {

/// Parses a token stream; a syntax error is an Error naming the line and what was expected.
Body parse(const std::vector<Token>& tokens);

}  // namespace troupe::jinja
