// A compiled Jinja template, rendered as Hugging Face transformers renders chat
// templates with jinja2: an immutable sandbox with trim_blocks, lstrip_blocks,
// loop controls, transformers' tojson, raise_exception and strftime_now.
// Unsupported constructs (include/extends/import, recursive loops, call blocks
// with caller arguments, "%" string formatting, *args in calls) are compile or
// render errors that name them.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/text/chat/jinja/value.hpp"
#include "troupe/status.hpp"

namespace troupe::jinja {

struct Node;

struct RenderOptions {
  std::time_t now = 0;         // what strftime_now formats (local time); 0: the current time
  int64_t max_output = 64 << 20;   // bytes; a template that writes more fails
  int64_t max_steps = 1'000'000;   // loop iterations and macro calls; a template that runs longer fails
};

class Template {
 public:
  /// Parses `source`; a syntax error is invalid_argument naming the line and the problem.
  static Result<Template> compile(std::string_view source);

  /// Renders with `context` as the template's variables (a dict). A failure is
  /// invalid_argument: raise_exception's message ("the template raised: ..."),
  /// or the error jinja2 would raise (undefined attribute use, type errors, ...).
  Result<std::string> render(const Value& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace troupe::jinja
