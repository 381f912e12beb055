// The parsed form of a Jinja template: expressions and statements.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/text/chat/jinja/value.hpp"

namespace troupe::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,   // value
    name,      // name
    list,      // args
    tuple,     // args
    dict,      // args: key, value, key, value, ...
    attr,      // args[0].name
    item,      // args[0][args[1]]
    slice,     // args[0][args[1]:args[2]:args[3]] (null parts are omitted)
    call,      // args[0](args[1..], kwargs)
    filter,    // args[0] | name(args[1..], kwargs)
    test,      // args[0] is [not] name(args[1..]); negated
    not_,      // not args[0]
    neg,       // -args[0]
    pos,       // +args[0]
    binary,    // args[0] name args[1]: + - * / // % ** ~
    compare,   // args[0] ops[0] args[1] ops[1] args[2] ... (==, !=, <, <=, >, >=, in, notin)
    and_,      // args[0] and args[1]
    or_,       // args[0] or args[1]
    cond,      // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required (Undefined when not passed, as jinja2)
};

struct Node {
  enum class Kind {
    text,          // text
    output,        // {{ expr }}
    if_,           // branches (condition, body); else_body
    for_,          // targets in expr [if filter]: body, else_body
    set,           // targets = expr, or target_expr(.attr) = expr for namespaces
    set_block,     // {% set targets[0] %}body{% endset %} (filter optional)
    macro,         // name(params): body
    call_block,    // {% call expr %}body{% endcall %}: caller() renders body
    filter_block,  // {% filter expr %}body{% endfilter %}
    break_,
    continue_,
    scope,         // body in its own scope ({% with %})
    passthrough,   // body rendered as is ({% generation %}, transformers' extension)
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr filter;       // for: loop filter; set_block / filter_block: the filter chain (input null)
  ExprPtr ns_target;    // set ns.attr = ...: the namespace expression; name = attr
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // with
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
};

}  // namespace troupe::jinja
