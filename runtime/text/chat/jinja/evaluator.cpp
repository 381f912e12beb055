// Renders the parsed template: scopes as jinja2 has them (a for loop's body and
// a macro's body are their own scope; if blocks are not), loop controls, macros
// and namespaces, with the sandbox's limits on loops and output.
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "runtime/text/chat/jinja/ast.hpp"
#include "runtime/text/chat/jinja/builtins.hpp"
#include "runtime/text/chat/jinja/lexer.hpp"
#include "runtime/text/chat/jinja/parser.hpp"
#include "runtime/text/chat/jinja/template.hpp"

namespace troupe::jinja {
namespace {

using detail::arg;
using detail::call;
using detail::get_attr;
using detail::get_item;

using Frame = std::unordered_map<std::string, Value>;
using Scopes = std::vector<std::shared_ptr<Frame>>;

enum class Flow { normal, break_, continue_ };

[[noreturn]] void fail_undefined(const Value& v) {
  throw Error(v.undefined_hint().empty() ? std::string("value is undefined") : v.undefined_hint());
}

[[noreturn]] void bad_operands(const std::string& op, const Value& l, const Value& r) {
  if (l.is_undefined()) fail_undefined(l);
  if (r.is_undefined()) fail_undefined(r);
  throw Error("TypeError: unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

/// Python's slice on n items: the indices it selects.
std::vector<int64_t> slice_indices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto none = [](const Value& v) { return v.is_none() || v.is_undefined(); };
  const int64_t step = none(step_v) ? 1 : step_v.as_int();
  if (step == 0) throw Error("ValueError: slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t def) {
    if (none(v)) return def;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = clamp(start_v, step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(stop_v, step > 0 ? n : -1);
  std::vector<int64_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(i);
  return out;
}

class Interp {
 public:
  Interp(const Value& context, const RenderOptions& options)
      : options_(options), globals_(detail::make_globals(options.now ? options.now : std::time(nullptr))) {
    auto root = std::make_shared<Frame>();
    if (context.is_dict())
      for (const auto& [k, v] : context.as_dict().items) (*root)[k.str()] = v;
    scopes_.push_back(std::move(root));
  }

  Flow render(const Body& body, std::string& out) {
    for (const auto& node : body) {
      const Flow f = exec(*node, out);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

 private:
  void write(std::string& out, const std::string& s) {
    out += s;
    if (static_cast<int64_t>(out.size()) > options_.max_output)
      throw Error("the template's output exceeds " + std::to_string(options_.max_output) + " bytes");
  }

  void step() {
    if (++steps_ > options_.max_steps)
      throw Error("the template ran more than " + std::to_string(options_.max_steps) + " loop iterations and calls");
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return f->second;
    }
    if (const Value* g = globals_.find(name)) return *g;
    return Value(Undefined{"'" + name + "' is undefined"});
  }

  void assign(const std::string& name, Value v) { (*scopes_.back())[name] = std::move(v); }

  void bind_targets(const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) return assign(targets[0], v);
    const ValueList items = v.iterate();
    if (items.size() != targets.size())
      throw Error("line " + std::to_string(line) + ": " +
                  (items.size() > targets.size() ? "too many values to unpack" : "not enough values to unpack") +
                  " (expected " + std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
    for (size_t i = 0; i < items.size(); ++i) assign(targets[i], items[i]);
  }

  struct ScopeGuard {
    Interp& in;
    explicit ScopeGuard(Interp& i) : in(i) { in.scopes_.push_back(std::make_shared<Frame>()); }
    ~ScopeGuard() { in.scopes_.pop_back(); }
  };

  Flow exec(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::text: write(out, n.text); return Flow::normal;
      case Node::Kind::output: write(out, eval(*n.expr).str()); return Flow::normal;
      case Node::Kind::if_:
        for (const auto& [cond, body] : n.branches)
          if (eval(*cond).truthy()) return render(body, out);
        return render(n.else_body, out);
      case Node::Kind::for_: return exec_for(n, out);
      case Node::Kind::set:
        if (n.ns_target) {
          const Value ns = eval(*n.ns_target);
          if (!ns.is_namespace())
            throw Error("line " + std::to_string(n.line) + ": cannot assign attribute on non-namespace object");
          ns.as_namespace().set(Value(n.name), eval(*n.expr));
        } else {
          bind_targets(n.targets, eval(*n.expr), n.line);
        }
        return Flow::normal;
      case Node::Kind::set_block: {
        std::string captured;
        {
          ScopeGuard g(*this);
          render(n.body, captured);
        }
        assign(n.targets[0], n.filter ? apply_filters(*n.filter, Value(captured)) : Value(captured));
        return Flow::normal;
      }
      case Node::Kind::macro: assign(n.name, make_macro(n)); return Flow::normal;
      case Node::Kind::call_block: {
        const Expr& c = *n.expr;
        const Value fn = eval(*c.args[0]);
        CallArgs a = eval_args(c);
        Scopes captured = scopes_;
        a.keyword.emplace_back("caller", Value::function("caller", [this, &n, captured](CallArgs&) {
                                 Scopes saved = std::move(scopes_);
                                 scopes_ = captured;
                                 scopes_.push_back(std::make_shared<Frame>());
                                 std::string body;
                                 render(n.body, body);
                                 scopes_ = std::move(saved);
                                 return Value(body);
                               }));
        write(out, call(fn, a).str());
        return Flow::normal;
      }
      case Node::Kind::filter_block: {
        std::string captured;
        render(n.body, captured);
        write(out, apply_filters(*n.filter, Value(captured)).str());
        return Flow::normal;
      }
      case Node::Kind::break_: return Flow::break_;
      case Node::Kind::continue_: return Flow::continue_;
      case Node::Kind::scope: {
        std::vector<std::pair<std::string, Value>> values;
        for (const auto& [name, e] : n.assignments) values.emplace_back(name, eval(*e));
        ScopeGuard g(*this);
        for (auto& [name, v] : values) assign(name, std::move(v));
        return render(n.body, out);
      }
      case Node::Kind::passthrough: return render(n.body, out);
    }
    return Flow::normal;
  }

  Flow exec_for(const Node& n, std::string& out) {
    ValueList items = eval(*n.expr).iterate();
    if (n.filter) {
      ValueList kept;
      for (const auto& item : items) {
        ScopeGuard g(*this);
        bind_targets(n.targets, item, n.line);
        if (eval(*n.filter).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      ScopeGuard g(*this);
      render(n.else_body, out);
      return Flow::normal;
    }
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      step();
      ScopeGuard g(*this);
      ValueDict loop;
      loop.items.reserve(12);
      loop.items.emplace_back(Value("index"), Value(i + 1));
      loop.items.emplace_back(Value("index0"), Value(i));
      loop.items.emplace_back(Value("revindex"), Value(length - i));
      loop.items.emplace_back(Value("revindex0"), Value(length - i - 1));
      loop.items.emplace_back(Value("first"), Value(i == 0));
      loop.items.emplace_back(Value("last"), Value(i == length - 1));
      loop.items.emplace_back(Value("length"), Value(length));
      loop.items.emplace_back(Value("depth"), Value(1));
      loop.items.emplace_back(Value("depth0"), Value(0));
      loop.items.emplace_back(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)]
                                                       : Value(Undefined{"there is no previous item"}));
      loop.items.emplace_back(Value("nextitem"), i + 1 < length ? items[static_cast<size_t>(i + 1)]
                                                                : Value(Undefined{"there is no next item"}));
      loop.items.emplace_back(Value("cycle"), Value::function("loop.cycle", [i](CallArgs& a) {
                                if (a.positional.empty()) throw Error("no items for cycling given");
                                return a.positional[static_cast<size_t>(i) % a.positional.size()];
                              }));
      assign("loop", Value(std::move(loop)));
      bind_targets(n.targets, items[static_cast<size_t>(i)], n.line);
      if (render(n.body, out) == Flow::break_) break;
    }
    return Flow::normal;
  }

  Value make_macro(const Node& n) {
    Scopes captured = scopes_;  // the defining scope (its frame holds the macro itself, for recursion)
    return Value::function(n.name, [this, &n, captured](CallArgs& a) {
      step();
      if (++depth_ > 100) throw Error("macro '" + n.name + "': recursion deeper than 100 calls");
      Scopes saved = std::move(scopes_);
      scopes_ = captured;
      scopes_.push_back(std::make_shared<Frame>());
      ValueList varargs;
      for (size_t i = 0; i < a.positional.size(); ++i) {
        if (i < n.params.size()) assign(n.params[i].name, a.positional[i]);
        else varargs.push_back(a.positional[i]);
      }
      ValueDict kwargs;
      for (const auto& [k, v] : a.keyword) {
        bool is_param = false;
        for (const auto& p : n.params) is_param = is_param || p.name == k;
        if (is_param || k == "caller") assign(k, v);
        else kwargs.set(Value(k), v);
      }
      for (size_t i = a.positional.size(); i < n.params.size(); ++i) {
        const auto& p = n.params[i];
        if (scopes_.back()->count(p.name)) continue;
        assign(p.name, p.default_value ? eval(*p.default_value)
                                       : Value(Undefined{"parameter '" + p.name + "' was not provided"}));
      }
      assign("varargs", Value::tuple(std::move(varargs)));
      assign("kwargs", Value(std::move(kwargs)));
      std::string body;
      render(n.body, body);
      scopes_ = std::move(saved);
      --depth_;
      return Value(body);
    });
  }

  CallArgs eval_args(const Expr& e, size_t first = 1) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, eval(*v));
    return a;
  }

  /// A filter chain whose innermost input is null (block set, filter block) applied to `input`.
  Value apply_filters(const Expr& f, const Value& input) {
    const Value inner = f.args[0] ? apply_filters(*f.args[0], input) : input;
    CallArgs a = eval_args(f);
    return detail::filter(f.name, inner, a);
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::literal: return e.value;
      case Expr::Kind::name: return lookup(e.name);
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        ValueList l;
        for (const auto& x : e.args) l.push_back(eval(*x));
        return e.kind == Expr::Kind::tuple ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case Expr::Kind::dict: {
        ValueDict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) d.set(eval(*e.args[i]), eval(*e.args[i + 1]));
        return Value(std::move(d));
      }
      case Expr::Kind::attr: return get_attr(eval(*e.args[0]), e.name);
      case Expr::Kind::item: return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::slice: {
        const Value target = eval(*e.args[0]);
        const Value parts[3] = {e.args[1] ? eval(*e.args[1]) : Value(None{}), e.args[2] ? eval(*e.args[2]) : Value(None{}),
                                e.args[3] ? eval(*e.args[3]) : Value(None{})};
        if (target.is_undefined()) fail_undefined(target);
        if (target.is_string()) {
          const auto chars = utf8_chars(target.as_string());
          std::string s;
          for (int64_t i : slice_indices(static_cast<int64_t>(chars.size()), parts[0], parts[1], parts[2]))
            s += chars[static_cast<size_t>(i)];
          return Value(s);
        }
        if (!target.is_list() || target.is_iterator())
          throw Error("TypeError: '" + target.type_name() + "' object is not subscriptable");
        const auto& l = target.as_list();
        ValueList out;
        for (int64_t i : slice_indices(static_cast<int64_t>(l.size()), parts[0], parts[1], parts[2]))
          out.push_back(l[static_cast<size_t>(i)]);
        return Value(std::move(out));
      }
      case Expr::Kind::call: {
        const Value fn = eval(*e.args[0]);
        CallArgs a = eval_args(e);
        return call(fn, a);
      }
      case Expr::Kind::filter: {
        const Value input = eval(*e.args[0]);
        CallArgs a = eval_args(e);
        return detail::filter(e.name, input, a);
      }
      case Expr::Kind::test: {
        const Value input = eval(*e.args[0]);
        CallArgs a = eval_args(e);
        return Value(detail::test(e.name, input, a) != e.negated);
      }
      case Expr::Kind::not_: return Value(!eval(*e.args[0]).truthy());
      case Expr::Kind::neg:
      case Expr::Kind::pos: {
        const Value v = eval(*e.args[0]);
        if (v.is_undefined()) fail_undefined(v);
        if (!v.is_number()) throw Error("TypeError: bad operand type for unary " + std::string(e.kind == Expr::Kind::neg ? "-" : "+") + ": '" + v.type_name() + "'");
        if (e.kind == Expr::Kind::pos) return v.is_bool() ? Value(v.as_int()) : v;
        return v.is_float() ? Value(-v.as_float()) : Value(-v.as_int());
      }
      case Expr::Kind::binary: return binary(e.name, eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::compare: {
        Value left = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1]);
          const std::string& op = e.ops[i];
          bool r = false;
          if (op == "==") r = left.equals(right);
          else if (op == "!=") r = !left.equals(right);
          else if (op == "<") r = left.less(right);
          else if (op == ">") r = right.less(left);
          else if (op == "<=") r = left.less(right) || left.equals(right);
          else if (op == ">=") r = right.less(left) || left.equals(right);
          else if (op == "in") r = detail::contains(right, left);
          else r = !detail::contains(right, left);
          if (!r) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::and_: {
        Value l = eval(*e.args[0]);
        return l.truthy() ? eval(*e.args[1]) : l;
      }
      case Expr::Kind::or_: {
        Value l = eval(*e.args[0]);
        return l.truthy() ? l : eval(*e.args[1]);
      }
      case Expr::Kind::cond:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value(Undefined{"the inline if-expression on line " + std::to_string(e.line) +
                               " evaluated to false and no else section was defined."});
    }
    return Value();
  }

  Value binary(const std::string& op, const Value& l, const Value& r) {
    if (op == "~") return Value(l.str() + r.str());
    const bool nums = l.is_number() && r.is_number();
    const bool fl = nums && (l.is_float() || r.is_float());
    if (op == "+") {
      if (nums) return fl ? Value(l.as_float() + r.as_float()) : Value(l.as_int() + r.as_int());
      if (l.is_string() && r.is_string()) {
        if (static_cast<int64_t>(l.as_string().size() + r.as_string().size()) > options_.max_output)
          throw Error("string too long");
        if (l.is_markup() || r.is_markup())  // Markup.__add__/__radd__ escape the plain operand
          return Value::markup((l.is_markup() ? l.as_string() : detail::html_escape(l.as_string())) +
                               (r.is_markup() ? r.as_string() : detail::html_escape(r.as_string())));
        return Value(l.as_string() + r.as_string());
      }
      if (l.is_list() && r.is_list()) {
        ValueList out = l.as_list();
        out.insert(out.end(), r.as_list().begin(), r.as_list().end());
        return Value(std::move(out));
      }
      bad_operands(op, l, r);
    }
    if (op == "-") {
      if (!nums) bad_operands(op, l, r);
      return fl ? Value(l.as_float() - r.as_float()) : Value(l.as_int() - r.as_int());
    }
    if (op == "*") {
      if (nums) return fl ? Value(l.as_float() * r.as_float()) : Value(l.as_int() * r.as_int());
      const Value* seq = l.is_string() || l.is_list() ? &l : &r;
      const Value* times = seq == &l ? &r : &l;
      if ((seq->is_string() || seq->is_list()) && times->is_number() && !times->is_float()) {
        const int64_t n = std::max<int64_t>(0, times->as_int());
        if (n * seq->length() > options_.max_output) throw Error("sequence repetition too large");
        if (seq->is_string()) {
          std::string s;
          for (int64_t i = 0; i < n; ++i) s += seq->as_string();
          return Value(s);
        }
        ValueList out;
        for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->as_list().begin(), seq->as_list().end());
        return Value(std::move(out));
      }
      bad_operands(op, l, r);
    }
    if (op == "/" || op == "//" || op == "%") {
      if (l.is_string() && op == "%") throw Error("'%' string formatting is not supported; use format() or '~'");
      if (!nums) bad_operands(op, l, r);
      if (r.as_float() == 0) throw Error(op == "/" ? "ZeroDivisionError: division by zero" : "ZeroDivisionError: integer division or modulo by zero");
      if (op == "/") return Value(l.as_float() / r.as_float());
      if (fl) {
        const double q = std::floor(l.as_float() / r.as_float());
        return op == "//" ? Value(q) : Value(l.as_float() - q * r.as_float());
      }
      const int64_t q = floor_div(l.as_int(), r.as_int());
      return op == "//" ? Value(q) : Value(l.as_int() - q * r.as_int());
    }
    if (op == "**") {
      if (!nums) bad_operands(op, l, r);
      if (!fl && r.as_int() >= 0) {
        int64_t acc = 1;
        for (int64_t i = 0; i < r.as_int() && i < 64; ++i) acc *= l.as_int();
        return Value(acc);
      }
      return Value(std::pow(l.as_float(), r.as_float()));
    }
    throw Error("unknown operator " + op);
  }

  const RenderOptions& options_;
  ValueDict globals_;
  Scopes scopes_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Template> Template::compile(std::string_view source) {
  try {
    Template t;
    t.body_ = std::make_shared<const Body>(parse(tokenize(source)));
    return t;
  } catch (const Error& e) {
    return invalid_argument(std::string("template syntax error: ") + e.what());
  }
}

Result<std::string> Template::render(const Value& context, const RenderOptions& options) const {
  if (!body_) return invalid_argument("render: the template is not compiled");
  try {
    Interp in(context, options);
    std::string out;
    in.render(*body_, out);  // break/continue outside a loop end the template, as jinja2 rejects them at parse time
    return out;
  } catch (const detail::RaisedError& e) {
    return invalid_argument(std::string("the template raised an error: ") + e.what());
  } catch (const Error& e) {
    return invalid_argument(std::string("template render error: ") + e.what());
  } catch (const std::exception& e) {
    return invalid_argument(std::string("template render error: ") + e.what());
  }
}

}  // namespace troupe::jinja
