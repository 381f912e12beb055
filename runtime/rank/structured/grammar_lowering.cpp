// Text grammars (grammar_text_ast.hpp) to lexemes and rules.
//
// Lark: terminals (UPPERCASE definitions, literals, regexes) become lexemes,
// each with the %ignore'd text allowed before it; rules become rules. GBNF: a
// rule that is not recursive is folded into a regex; in a recursive rule the
// runs of such pieces become lexemes. Repetitions of rules become left-
// recursive helper rules (what an Earley parser handles best).
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "runtime/rank/structured/grammar_frontends.hpp"
#include "runtime/rank/structured/grammar_text_ast.hpp"
#include "runtime/rank/structured/json_schema_compiler.hpp"
#include "runtime/rank/structured/regex_syntax.hpp"

namespace troupe::structured {
namespace {

// Lark's common.lark terminals, written out here (Python regex syntax).
const std::map<std::string, std::string>& common_terminals() {
  static const std::map<std::string, std::string> k = {
      {"DIGIT", "[0-9]"},
      {"HEXDIGIT", "[a-fA-F0-9]"},
      {"INT", "[0-9]+"},
      {"SIGNED_INT", "[+-]?[0-9]+"},
      {"DECIMAL", "[0-9]+\\.[0-9]*|\\.[0-9]+"},
      {"_EXP", "[eE][+-]?[0-9]+"},
      {"FLOAT", "[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?"},
      {"SIGNED_FLOAT", "[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"},
      {"NUMBER", "[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+"},
      {"SIGNED_NUMBER", "[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+)"},
      {"ESCAPED_STRING", "\"(?:[^\"\\\\]|\\\\.)*\""},
      {"LETTER", "[A-Za-z]"},
      {"LCASE_LETTER", "[a-z]"},
      {"UCASE_LETTER", "[A-Z]"},
      {"WORD", "[A-Za-z]+"},
      {"CNAME", "[_A-Za-z][_A-Za-z0-9]*"},
      {"WS_INLINE", "[ \\t]+"},
      {"WS", "[ \\t\\f\\r\\n]+"},
      {"CR", "\\r"},
      {"LF", "\\n"},
      {"NEWLINE", "(?:\\r?\\n)+"},
      {"SH_COMMENT", "#[^\\n]*"},
      {"CPP_COMMENT", "//[^\\n]*"},
      {"C_COMMENT", "/\\*(?:[^*]|\\*+[^*/])*\\*+/"},
      {"SQL_COMMENT", "--[^\\n]*"},
  };
  return k;
}

class Lowering {
 public:
  Lowering(const GrammarText& g, GrammarBuilder& b) : g_(g), b_(b), s_(b.exprs()) {}

  Result<Symbol> run() {
    for (const GrammarRuleText& r : g_.rules) {
      if (!defs_.emplace(r.name, &r).second) return grammar_error(r.at, "\"" + r.name + "\" is defined twice");
    }
    auto start = defs_.find(g_.start);
    if (start == defs_.end()) return invalid_argument("grammar: no \"" + g_.start + "\" rule");
    if (g_.lark) {
      std::vector<ExprId> ignored;
      for (const GrammarNode& n : g_.ignore) {
        auto e = regex_of(n);
        if (!e) return e.status();
        ignored.push_back(*e);
      }
      ignore_ = s_.star(s_.alt(ignored));
    } else {
      TROUPE_RETURN_IF_ERROR(find_recursive_rules());
    }
    auto root = rule_symbol(*start->second);
    if (!root) return root;
    if (!g_.lark || ignore_ == ExprStore::kEmpty) return root;
    Symbol with_tail = b_.rule("start with trailing ignored text");  // %ignore'd text may also end the output
    b_.add(with_tail, {*root, b_.token(ignore_, "ignored")});
    return with_tail;
  }

 private:
  const GrammarRuleText* find(const GrammarNode& ref) const {
    auto it = defs_.find(ref.text);
    return it == defs_.end() ? nullptr : it->second;
  }

  // GBNF: rules on a cycle of references (Tarjan's strongly connected components).
  Status find_recursive_rules() {
    std::map<std::string, std::vector<std::string>> edges;
    for (const GrammarRuleText& r : g_.rules) {
      std::function<Status(const GrammarNode&)> collect = [&](const GrammarNode& n) -> Status {
        if (n.kind == GrammarNode::Kind::ref) {
          if (!defs_.count(n.text)) return grammar_error(n.at, "undefined rule \"" + n.text + "\"");
          edges[r.name].push_back(n.text);
        }
        for (const auto& k : n.kids) TROUPE_RETURN_IF_ERROR(collect(k));
        return {};
      };
      TROUPE_RETURN_IF_ERROR(collect(r.body));
    }
    std::map<std::string, int> index, low;
    std::vector<std::string> stack;
    std::set<std::string> on_stack;
    int next = 0;
    std::function<void(const std::string&)> visit = [&](const std::string& v) {
      index[v] = low[v] = next++;
      stack.push_back(v);
      on_stack.insert(v);
      for (const std::string& w : edges[v]) {
        if (!index.count(w)) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on_stack.count(w)) {
          low[v] = std::min(low[v], index[w]);
        }
      }
      if (low[v] == index[v]) {
        std::vector<std::string> scc;
        std::string w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack.erase(w);
          scc.push_back(w);
        } while (w != v);
        bool self = std::find(edges[v].begin(), edges[v].end(), v) != edges[v].end();
        if (scc.size() > 1 || self) recursive_.insert(scc.begin(), scc.end());
      }
    };
    for (const GrammarRuleText& r : g_.rules) {
      if (!index.count(r.name)) visit(r.name);
    }
    return {};
  }

  // GBNF: whether a node folds into a regex (refers to no recursive rule, even indirectly).
  bool regular(const GrammarNode& n) {
    if (n.kind == GrammarNode::Kind::json_schema) return false;
    if (n.kind == GrammarNode::Kind::ref) {
      if (recursive_.count(n.text)) return false;
      auto it = regular_rules_.find(n.text);
      if (it != regular_rules_.end()) return it->second;
      bool r = regular(find(n)->body);
      regular_rules_[n.text] = r;
      return r;
    }
    for (const auto& k : n.kids) {
      if (!regular(k)) return false;
    }
    return true;
  }

  Result<ExprId> regex_text(const std::string& source, const std::string& flags, const TextPosition& at) {
    RegexLimits limits;
    limits.dot_all = flags.find('s') != std::string::npos;
    auto tree = parse_regex(source, RegexDialect::python, limits);
    if (!tree) return grammar_error(at, tree.status().message());
    bool fold = flags.find('i') != std::string::npos;
    CharEncoder encode = [this, fold](const CodepointSet& set) { return utf8_expr(s_, fold ? fold_ascii_case(set) : set); };
    auto e = lower_full_match(s_, *tree, encode);
    if (!e) return grammar_error(at, e.status().message());
    return *e;
  }

  // A node as one regex: terminal bodies (Lark) and regular pieces (GBNF).
  // Definitions referring to definitions nest the lowering; past this it is an error.
  static constexpr int kMaxNesting = 1000;
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(++x) {}
    ~Depth() { --d; }
  };
  Status nesting(const TextPosition& at) const {
    if (depth_ < kMaxNesting) return {};
    return grammar_error(at, "rules or terminals nested more than " + std::to_string(kMaxNesting) + " deep");
  }

  Result<ExprId> regex_of(const GrammarNode& n) {
    TROUPE_RETURN_IF_ERROR(b_.check_budget());
    TROUPE_RETURN_IF_ERROR(nesting(n.at));
    Depth depth(depth_);
    switch (n.kind) {
      case GrammarNode::Kind::literal: {
        if (!n.fold_case) return s_.literal(n.text);
        std::vector<ExprId> parts;
        for (char c : n.text) {
          CodepointSet one = CodepointSet::of(static_cast<unsigned char>(c));
          parts.push_back(std::isalpha(static_cast<unsigned char>(c)) ? utf8_expr(s_, fold_ascii_case(one))
                                                                      : s_.byte(static_cast<uint8_t>(c)));
        }
        return s_.concat(parts);
      }
      case GrammarNode::Kind::chars:
        return utf8_expr(s_, n.chars);
      case GrammarNode::Kind::regex:
        return regex_text(n.text, n.flags, n.at);
      case GrammarNode::Kind::json_schema:
        return grammar_error(n.at, "%json is a rule, not part of a terminal");
      case GrammarNode::Kind::ref:
        return ref_regex(n);
      case GrammarNode::Kind::seq:
      case GrammarNode::Kind::alt: {
        std::vector<ExprId> parts;
        for (const auto& k : n.kids) {
          auto e = regex_of(k);
          if (!e) return e;
          parts.push_back(*e);
        }
        return n.kind == GrammarNode::Kind::seq ? s_.concat(parts) : s_.alt(parts);
      }
      case GrammarNode::Kind::repeat: {
        auto e = regex_of(n.kids[0]);
        if (!e) return e;
        return s_.repeat(*e, n.lo, n.hi);
      }
    }
    return ExprStore::kNothing;
  }

  Result<ExprId> ref_regex(const GrammarNode& n) {
    if (n.text.rfind("common.", 0) == 0) {
      auto it = common_terminals().find(n.text.substr(7));
      if (it == common_terminals().end()) return grammar_error(n.at, "no terminal \"" + n.text.substr(7) + "\" in common");
      return regex_text(it->second, "", n.at);
    }
    const GrammarRuleText* def = find(n);
    if (!def) return grammar_error(n.at, "undefined " + std::string(g_.lark ? "terminal" : "rule") + " \"" + n.text + "\"");
    if (g_.lark && !def->terminal) return grammar_error(n.at, "terminal refers to rule \"" + n.text + "\"");
    auto known = regexes_.find(n.text);
    if (known != regexes_.end()) return known->second;
    if (!in_progress_.insert(n.text).second) return grammar_error(n.at, "terminal \"" + n.text + "\" refers to itself");
    auto e = regex_of(def->body);
    in_progress_.erase(n.text);
    if (!e) return e;
    regexes_.emplace(n.text, *e);
    return *e;
  }

  Result<Symbol> rule_symbol(const GrammarRuleText& def) {
    auto known = rules_.find(def.name);
    if (known != rules_.end()) return known->second;
    if (def.terminal || (!g_.lark && !recursive_.count(def.name) && regular(def.body))) {
      GrammarNode ref;
      ref.kind = GrammarNode::Kind::ref;
      ref.text = def.name;
      ref.at = def.at;
      auto e = ref_regex(ref);
      if (!e) return e.status();
      Symbol t = token(*e, def.name);
      rules_.emplace(def.name, t);
      return t;
    }
    Symbol r = b_.rule(def.name);
    rules_.emplace(def.name, r);
    const std::vector<GrammarNode> single{def.body};
    for (const GrammarNode& alt : def.body.kind == GrammarNode::Kind::alt ? def.body.kids : single) {
      auto rhs = sequence(alt);
      if (!rhs) return rhs.status();
      b_.add(r, std::move(*rhs));
    }
    return r;
  }

  Symbol token(ExprId regex, const std::string& name) {
    return b_.token(g_.lark ? s_.concat(ignore_, regex) : regex, name);
  }

  // The symbols of a node written in sequence (GBNF: runs of regular items merged).
  Result<std::vector<Symbol>> sequence(const GrammarNode& n) {
    std::vector<Symbol> out;
    const std::vector<GrammarNode> single{n};
    const std::vector<GrammarNode>& items = n.kind == GrammarNode::Kind::seq ? n.kids : single;
    std::vector<ExprId> run;
    auto flush = [&]() {
      if (!run.empty()) out.push_back(token(s_.concat(run), "text"));
      run.clear();
    };
    for (const GrammarNode& item : items) {
      if (!g_.lark && regular(item)) {
        auto e = regex_of(item);
        if (!e) return e.status();
        run.push_back(*e);
        continue;
      }
      flush();
      if (item.kind == GrammarNode::Kind::seq) {
        auto inner = sequence(item);
        if (!inner) return inner;
        out.insert(out.end(), inner->begin(), inner->end());
      } else {
        auto s = symbol(item);
        if (!s) return s.status();
        out.push_back(*s);
      }
    }
    flush();
    return out;
  }

  // One node as one symbol.
  Result<Symbol> symbol(const GrammarNode& n) {
    TROUPE_RETURN_IF_ERROR(b_.check_budget());
    TROUPE_RETURN_IF_ERROR(nesting(n.at));
    Depth depth(depth_);
    switch (n.kind) {
      case GrammarNode::Kind::literal:
      case GrammarNode::Kind::chars:
      case GrammarNode::Kind::regex: {
        auto e = regex_of(n);
        if (!e) return e.status();
        return token(*e, n.text);
      }
      case GrammarNode::Kind::ref: {
        if (n.text.rfind("common.", 0) == 0) {
          auto e = ref_regex(n);
          if (!e) return e.status();
          return token(*e, n.text);
        }
        const GrammarRuleText* def = find(n);
        if (!def) return grammar_error(n.at, "undefined rule \"" + n.text + "\"");
        return rule_symbol(*def);
      }
      case GrammarNode::Kind::json_schema:
        return json_value(n);
      case GrammarNode::Kind::seq:
      case GrammarNode::Kind::alt: {
        Symbol r = b_.rule("group");
        const std::vector<GrammarNode> single{n};
        for (const GrammarNode& alt : n.kind == GrammarNode::Kind::alt ? n.kids : single) {
          auto rhs = sequence(alt);
          if (!rhs) return rhs.status();
          b_.add(r, std::move(*rhs));
        }
        return r;
      }
      case GrammarNode::Kind::repeat:
        return repetition(n);
    }
    return b_.rule("nothing");
  }

  // x{lo,hi}: lo copies, then hi - lo optional ones nested (or x* as star -> star x | e).
  Result<Symbol> repetition(const GrammarNode& n) {
    if (!g_.lark && regular(n)) {
      auto e = regex_of(n);
      if (!e) return e.status();
      return token(*e, "text");
    }
    auto item = sequence(n.kids[0]);
    if (!item) return item.status();
    Symbol tail = b_.rule("repeat");
    if (n.hi == ExprStore::kUnbounded) {
      std::vector<Symbol> more{tail};
      more.insert(more.end(), item->begin(), item->end());
      b_.add(tail, std::move(more));
      b_.add(tail, {});
    } else {
      b_.add(tail, {});
      for (uint32_t i = n.lo; i < n.hi; ++i) {
        TROUPE_RETURN_IF_ERROR(b_.check_budget());
        Symbol up = b_.rule("repeat");
        std::vector<Symbol> rhs = *item;
        rhs.push_back(tail);
        b_.add(up, std::move(rhs));
        b_.add(up, {});
        tail = up;
      }
    }
    Symbol r = b_.rule("repeat");
    std::vector<Symbol> rhs;
    for (uint32_t i = 0; i < n.lo; ++i) rhs.insert(rhs.end(), item->begin(), item->end());
    rhs.push_back(tail);
    b_.add(r, std::move(rhs));
    return r;
  }

  Result<Symbol> json_value(const GrammarNode& n) {
    SchemaJson schema;
    try {
      schema = SchemaJson::parse(n.text);
    } catch (const std::exception& e) {
      return grammar_error(n.at, std::string("%json: not valid JSON: ") + e.what());
    }
    schemas_.push_back(std::make_unique<SchemaJson>(std::move(schema)));
    auto ws = json_whitespace(s_, JsonSchemaOptions{});
    if (!ws) return ws.status();
    SchemaCompiler compiler(*schemas_.back(), *ws, b_);
    auto v = compiler.value({{schemas_.back().get(), 0}});
    if (!v) return grammar_error(n.at, "%json: " + v.status().message());
    return *v;
  }

  const GrammarText& g_;
  GrammarBuilder& b_;
  ExprStore& s_;
  std::map<std::string, const GrammarRuleText*> defs_;
  std::set<std::string> recursive_;
  std::map<std::string, bool> regular_rules_;
  std::map<std::string, ExprId> regexes_;
  std::set<std::string> in_progress_;
  std::map<std::string, Symbol> rules_;
  ExprId ignore_ = ExprStore::kEmpty;
  std::vector<std::unique_ptr<SchemaJson>> schemas_;
  int depth_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> compile_grammar_text(std::string_view text, const GrammarLimits& limits) {
  const bool gbnf = text.find("::=") != std::string_view::npos;
  auto parsed = gbnf ? parse_gbnf(text) : parse_lark(text);
  if (!parsed) return parsed.status();
  GrammarBuilder builder(limits);
  Lowering lowering(*parsed, builder);
  auto start = lowering.run();
  if (!start) return start.status();
  return builder.build(*start);
}

}  // namespace troupe::structured
