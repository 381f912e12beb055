#include "runtime/text/chat/jinja/parser.hpp"

#include <cstdlib>
#include <set>

namespace troupe::jinja {
namespace {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, &end);
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("syntax error at line " + std::to_string(cur().line) + ": " + what);
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case T::text: return "text";
      case T::var_begin: return "'{{'";
      case T::var_end: return "'}}'";
      case T::block_begin: return "'{%'";
      case T::block_end: return "'%}'";
      case T::name: return "'" + t.value + "'";
      case T::string: return "a string";
      case T::integer:
      case T::floating: return "a number";
      case T::op: return "'" + t.value + "'";
      case T::eof: return "the end of the template";
    }
    return "?";
  }
  bool is_op(const char* op) const { return cur().type == T::op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == T::name && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != T::name) fail("expected a name, got " + describe(cur()));
    std::string n = cur().value;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().type != T::block_end) fail("expected '%}', got " + describe(cur()));
    advance();
  }

  /// Statements until a block whose keyword is in `ends` (the keyword is consumed and
  /// returned in *end; the rest of that tag is the caller's). With no ends: until eof.
  Body parse_body(const std::set<std::string>& ends, std::string* end) {
    Body body;
    while (true) {
      const Token& tok = cur();
      if (tok.type == T::eof) {
        if (!ends.empty()) {
          std::string names;
          for (const auto& e : ends) names += (names.empty() ? "'" : " or '") + e + "'";
          fail("unexpected end of template; expected " + names);
        }
        return body;
      }
      if (tok.type == T::text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::text;
        n->line = tok.line;
        n->text = tok.value;
        body.push_back(std::move(n));
        advance();
      } else if (tok.type == T::var_begin) {
        advance();
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::output;
        n->line = tok.line;
        n->expr = parse_tuple_or_expr();
        if (cur().type != T::var_end) fail("expected '}}', got " + describe(cur()));
        advance();
        body.push_back(std::move(n));
      } else if (tok.type == T::block_begin) {
        advance();
        if (cur().type != T::name) fail("expected a tag name, got " + describe(cur()));
        const std::string kw = cur().value;
        if (ends.count(kw)) {
          advance();
          *end = kw;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(tok));
      }
    }
  }

  Body parse_block_until(const std::string& end_kw) {
    std::string end;
    Body b = parse_body({end_kw}, &end);
    expect_block_end();
    return b;
  }

  NodePtr parse_statement() {
    const int line = cur().line;
    const std::string kw = expect_name();
    auto n = std::make_unique<Node>();
    n->line = line;
    if (kw == "if") {
      n->kind = Node::Kind::if_;
      ExprPtr cond = parse_expression();
      expect_block_end();
      while (true) {
        std::string end;
        Body b = parse_body({"elif", "else", "endif"}, &end);
        n->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = parse_expression();
          expect_block_end();
          continue;
        }
        expect_block_end();
        if (end == "else") n->else_body = parse_block_until("endif");
        break;
      }
    } else if (kw == "for") {
      n->kind = Node::Kind::for_;
      n->targets = parse_targets();
      if (!skip_name("in")) fail("expected 'in' in a for loop, got " + describe(cur()));
      n->expr = parse_tuple_or_expr(/*with_condexpr=*/false);
      if (skip_name("if")) n->filter = parse_expression();
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      std::string end;
      n->body = parse_body({"else", "endfor"}, &end);
      expect_block_end();
      if (end == "else") n->else_body = parse_block_until("endfor");
    } else if (kw == "set") {
      if (cur().type == T::name && peek().type == T::op && peek().value == "." && peek(2).type == T::name &&
          peek(3).type == T::op && peek(3).value == "=") {
        n->kind = Node::Kind::set;
        auto ns = std::make_unique<Expr>();
        ns->kind = Expr::Kind::name;
        ns->line = line;
        ns->name = expect_name();
        n->ns_target = std::move(ns);
        advance();  // '.'
        n->name = expect_name();
        expect_op("=");
        n->expr = parse_tuple_or_expr();
        expect_block_end();
      } else {
        n->targets = parse_targets();
        if (skip_op("=")) {
          n->kind = Node::Kind::set;
          n->expr = parse_tuple_or_expr();
          expect_block_end();
        } else {
          if (n->targets.size() != 1) fail("a block set assigns one name");
          n->kind = Node::Kind::set_block;
          if (is_op("|")) n->filter = parse_filter_chain(nullptr);
          expect_block_end();
          n->body = parse_block_until("endset");
        }
      }
    } else if (kw == "macro") {
      n->kind = Node::Kind::macro;
      n->name = expect_name();
      expect_op("(");
      while (!skip_op(")")) {
        if (!n->params.empty()) expect_op(",");
        if (skip_op(")")) break;
        MacroParam p;
        p.name = expect_name();
        if (skip_op("=")) p.default_value = parse_expression();
        n->params.push_back(std::move(p));
      }
      expect_block_end();
      n->body = parse_block_until("endmacro");
    } else if (kw == "call") {
      n->kind = Node::Kind::call_block;
      if (is_op("(")) fail("call blocks with caller arguments are not supported");
      n->expr = parse_expression();
      if (n->expr->kind != Expr::Kind::call) fail("expected a macro call after 'call'");
      expect_block_end();
      n->body = parse_block_until("endcall");
    } else if (kw == "filter") {
      n->kind = Node::Kind::filter_block;
      n->filter = parse_filter_chain(nullptr, /*first_without_pipe=*/true);
      expect_block_end();
      n->body = parse_block_until("endfilter");
    } else if (kw == "with") {
      n->kind = Node::Kind::scope;
      while (cur().type != T::block_end) {
        if (!n->assignments.empty()) expect_op(",");
        std::string name = expect_name();
        expect_op("=");
        n->assignments.emplace_back(name, parse_expression());
      }
      expect_block_end();
      n->body = parse_block_until("endwith");
    } else if (kw == "generation") {
      n->kind = Node::Kind::passthrough;
      expect_block_end();
      n->body = parse_block_until("endgeneration");
    } else if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::Kind::break_ : Node::Kind::continue_;
      expect_block_end();
    } else {
      throw Error("syntax error at line " + std::to_string(line) + ": " +
                  (kw.rfind("end", 0) == 0 || kw == "elif" || kw == "else" ? "unexpected tag '" + kw + "'"
                                                                           : "unknown or unsupported tag '" + kw + "'"));
    }
    return n;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  /// An expression, or an implicit tuple "a, b".
  ExprPtr parse_tuple_or_expr(bool with_condexpr = true) {
    const int line = cur().line;
    ExprPtr first = with_condexpr ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto tup = make(Expr::Kind::tuple, line);
    tup->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == T::block_end || cur().type == T::var_end) break;
      tup->args.push_back(with_condexpr ? parse_expression() : parse_or());
    }
    return tup;
  }

  ExprPtr parse_expression() {
    const int line = cur().line;
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      auto c = make(Expr::Kind::cond, line);
      ExprPtr cond = parse_or();
      ExprPtr other = skip_name("else") ? parse_expression() : nullptr;
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      auto n = make(Expr::Kind::or_, cur().line);
      advance();
      n->args.push_back(std::move(e));
      n->args.push_back(parse_and());
      e = std::move(n);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      auto n = make(Expr::Kind::and_, cur().line);
      advance();
      n->args.push_back(std::move(e));
      n->args.push_back(parse_not());
      e = std::move(n);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto n = make(Expr::Kind::not_, cur().line);
      advance();
      n->args.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == T::op && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                  cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
        op = cur().value;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().type == T::name && peek().value == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::compare, line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr binary(ExprPtr l, const std::string& op, ExprPtr r, int line) {
    auto n = make(Expr::Kind::binary, line);
    n->name = op;
    n->args.push_back(std::move(l));
    n->args.push_back(std::move(r));
    return n;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().value;
      const int line = cur().line;
      advance();
      e = binary(std::move(e), op, parse_concat(), line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const int line = cur().line;
      advance();
      e = binary(std::move(e), "~", parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().value;
      const int line = cur().line;
      advance();
      e = binary(std::move(e), op, parse_pow(), line);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      advance();
      e = binary(std::move(e), "**", parse_unary(true), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    const int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto n = make(is_op("-") ? Expr::Kind::neg : Expr::Kind::pos, line);
      advance();
      n->args.push_back(parse_unary(false));
      e = std::move(n);
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    const int line = tok.line;
    if (tok.type == T::name) {
      auto e = make(Expr::Kind::literal, line);
      if (tok.value == "true" || tok.value == "True") e->value = Value(true);
      else if (tok.value == "false" || tok.value == "False") e->value = Value(false);
      else if (tok.value == "none" || tok.value == "None") e->value = Value(None{});
      else e->kind = Expr::Kind::name, e->name = tok.value;
      advance();
      return e;
    }
    if (tok.type == T::string) {
      std::string s;
      while (cur().type == T::string) {
        s += cur().value;
        advance();
      }
      auto e = make(Expr::Kind::literal, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (tok.type == T::integer) {
      auto e = make(Expr::Kind::literal, line);
      errno = 0;
      const long long v = std::strtoll(tok.value.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal out of range: " + tok.value);
      e->value = Value(static_cast<int64_t>(v));
      advance();
      return e;
    }
    if (tok.type == T::floating) {
      auto e = make(Expr::Kind::literal, line);
      e->value = Value(std::strtod(tok.value.c_str(), nullptr));
      advance();
      return e;
    }
    if (is_op("(")) {
      advance();
      if (skip_op(")")) return make(Expr::Kind::tuple, line);
      ExprPtr first = parse_expression();
      if (skip_op(")")) return first;
      auto tup = make(Expr::Kind::tuple, line);
      tup->args.push_back(std::move(first));
      while (skip_op(",")) {
        if (is_op(")")) break;
        tup->args.push_back(parse_expression());
      }
      expect_op(")");
      return tup;
    }
    if (is_op("[")) {
      advance();
      auto l = make(Expr::Kind::list, line);
      while (!skip_op("]")) {
        if (!l->args.empty()) expect_op(",");
        if (skip_op("]")) break;
        l->args.push_back(parse_expression());
      }
      return l;
    }
    if (is_op("{")) {
      advance();
      auto d = make(Expr::Kind::dict, line);
      while (!skip_op("}")) {
        if (!d->args.empty()) expect_op(",");
        if (skip_op("}")) break;
        d->args.push_back(parse_expression());
        expect_op(":");
        d->args.push_back(parse_expression());
      }
      return d;
    }
    fail("unexpected " + describe(tok));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const int line = cur().line;
      if (is_op(".")) {
        advance();
        if (cur().type == T::name) {
          auto a = make(Expr::Kind::attr, line);
          a->name = cur().value;
          advance();
          a->args.push_back(std::move(e));
          e = std::move(a);
        } else if (cur().type == T::integer) {
          auto it = make(Expr::Kind::item, line);
          it->args.push_back(std::move(e));
          auto idx = make(Expr::Kind::literal, line);
          idx->value = Value(static_cast<int64_t>(std::strtoll(cur().value.c_str(), nullptr, 10)));
          advance();
          it->args.push_back(std::move(idx));
          e = std::move(it);
        } else {
          fail("expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        advance();
        e = parse_subscript(std::move(e), line);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    bool is_slice = false;
    if (!is_op(":")) parts[0] = parse_expression();
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) parts[1] = parse_expression();
      if (skip_op(":") && !is_op("]")) parts[2] = parse_expression();
    }
    expect_op("]");
    auto e = make(is_slice ? Expr::Kind::slice : Expr::Kind::item, line);
    e->args.push_back(std::move(target));
    e->args.push_back(std::move(parts[0]));
    if (is_slice) {
      e->args.push_back(std::move(parts[1]));
      e->args.push_back(std::move(parts[2]));
    }
    return e;
  }

  /// Arguments "(a, b, k=v)" into e->args (after what is already there) and e->kwargs.
  void parse_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == T::name && peek().type == T::op && peek().value == "=") {
        std::string key = cur().value;
        advance();
        advance();
        e.kwargs.emplace_back(key, parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument");
        e.args.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(Expr::Kind::call, cur().line);
    c->args.push_back(std::move(callee));
    parse_args(*c);
    return c;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        e = parse_filter_chain(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  /// "| f | g(x)" applied to `input` (null for filter blocks and block sets).
  ExprPtr parse_filter_chain(ExprPtr input, bool first_without_pipe = false) {
    bool first = true;
    while (is_op("|") || (first && first_without_pipe)) {
      if (!(first && first_without_pipe)) advance();
      first = false;
      auto f = make(Expr::Kind::filter, cur().line);
      f->name = expect_name();
      while (skip_op(".")) f->name.append(".").append(expect_name());
      f->args.push_back(std::move(input));
      if (is_op("(")) parse_args(*f);
      input = std::move(f);
    }
    return input;
  }

  ExprPtr parse_test(ExprPtr e) {
    auto t = make(Expr::Kind::test, cur().line);
    advance();  // 'is'
    t->negated = skip_name("not");
    t->name = expect_name();
    while (skip_op(".")) t->name.append(".").append(expect_name());
    t->args.push_back(std::move(e));
    if (is_op("(")) {
      parse_args(*t);
    } else if ((cur().type == T::name || cur().type == T::string || cur().type == T::integer ||
                cur().type == T::floating || is_op("[") || is_op("{")) &&
               !(is_name("else") || is_name("or") || is_name("and"))) {
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace troupe::jinja
