// jinja2's built-in filters, tests, globals and the attribute lookup rules of
// its sandbox (dict and str methods, unsafe list/dict mutators), shared by
// the evaluator. Internal to the jinja module.
#pragma once

#include <ctime>
#include <string>

#include "runtime/text/chat/jinja/value.hpp"

namespace troupe::jinja::detail {

/// The template raised it (raise_exception): reported as the template's own message.
class RaisedError : public Error {
 public:
  explicit RaisedError(const std::string& what) : Error(what) {}
};

/// Argument `pos` (or keyword `name`) of a filter/method/global called `fn`, else `def`.
Value arg(const CallArgs& a, size_t pos, const char* name, const Value& def = Value());

/// Python's str.strip family: chars none/undefined means whitespace.
std::string strip(const std::string& s, const Value& chars, bool left, bool right);
std::string ascii_upper(std::string s);
/// markupsafe's escape: & < > " ' as &amp; &lt; &gt; &#34; &#39;.
std::string html_escape(const std::string& s);
std::string ascii_lower(std::string s);

/// The sandbox's getattr (x.name) and getitem (x[key]) with jinja2's fallbacks between them.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
/// jinja2's attribute lookup for filters: "a.b.0" walks get_item.
Value get_path(const Value& obj, const std::string& path);
Value call(const Value& fn, CallArgs& args);

/// Applies the filter `name`; an unknown filter is an Error.
Value filter(const std::string& name, const Value& input, CallArgs& args);
/// Applies the test `name`; an unknown test is an Error.
bool test(const std::string& name, const Value& input, CallArgs& args);
bool contains(const Value& container, const Value& item);

/// The globals transformers' environment has: range, dict, namespace, raise_exception,
/// strftime_now (formatting `now`, local time), cycler and joiner are not.
ValueDict make_globals(std::time_t now);

}  // namespace troupe::jinja::detail
