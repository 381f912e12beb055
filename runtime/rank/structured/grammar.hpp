// A context-free grammar whose terminals are lexemes (byte regexes), the one
// form every structured-output front end compiles to (JSON Schema, regex,
// choice, Lark, GBNF, structural tags). GrammarBuilder collects lexemes and
// rules; Grammar is the frozen form the Earley parser reads (productions
// flattened into one array of symbols) plus the lexer's lazily built DFA.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/rank/structured/regex_expr.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

class LexerDfa;

/// Bounds on one compiled grammar: compile time and memory (each front end checks them
/// and names the one reached), and the per-step work of a matcher.
struct GrammarLimits {
  double compile_seconds = 1.0;
  size_t memory_bytes = size_t{256} << 20;
  /// Earley items in one parser row (one lexeme boundary).
  size_t max_row_items = 50'000;
  /// Trie nodes plus Earley items one token mask may visit.
  size_t max_mask_steps = 4'000'000;
  /// Regex derivatives one token mask may compute building lexer states (MaskBench's
  /// heaviest schemas need about 80k).
  size_t max_mask_derivatives = 1'000'000;
  /// Wall time of one token mask, seconds; 0: no bound (benchmarks). The server sets it
  /// (--structured-outputs-mask-timeout-ms) so that one heavy grammar cannot hold a step.
  double max_mask_seconds = 0;
};

/// A deadline and a memory account for a compile; check() names the limit reached.
class CompileBudget {
 public:
  explicit CompileBudget(const GrammarLimits& limits)
      : limits_(limits), deadline_(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                        std::chrono::duration<double>(limits.compile_seconds))) {}
  /// invalid_argument naming the limit when the time is up or `memory_now` is over it.
  Status check(size_t memory_now) const;
  const GrammarLimits& limits() const { return limits_; }

 private:
  GrammarLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
};

/// A grammar symbol while building: a lexeme (terminal) or a rule (nonterminal).
struct Symbol {
  uint32_t id = 0;
  bool terminal = false;
  bool operator==(const Symbol& o) const { return id == o.id && terminal == o.terminal; }
};

class Grammar {
 public:
  ~Grammar();
  uint32_t num_lexemes() const { return static_cast<uint32_t>(lexemes_.size()); }
  uint32_t num_rules() const { return static_cast<uint32_t>(nullable_.size()); }
  ExprId lexeme_regex(uint32_t lexeme) const { return lexemes_[lexeme]; }
  const std::string& lexeme_name(uint32_t lexeme) const { return lexeme_names_[lexeme]; }

  // The flattened productions: rhs()[dot] is a terminal t (0 <= t < num_lexemes), a rule
  // num_lexemes + r, or the end of production p as -(p + 1).
  const std::vector<int32_t>& rhs() const { return rhs_; }
  uint32_t production_lhs(uint32_t p) const { return production_lhs_[p]; }
  /// The first dots of rule r's productions.
  const uint32_t* rule_starts(uint32_t r, uint32_t* count) const {
    *count = rule_start_begin_[r + 1] - rule_start_begin_[r];
    return rule_starts_.data() + rule_start_begin_[r];
  }
  bool nullable(uint32_t r) const { return nullable_[r] != 0; }
  /// The augmented start production S' -> start: its first dot and its completed dot.
  uint32_t start_dot() const { return start_dot_; }
  uint32_t accept_dot() const { return accept_dot_; }

  LexerDfa& lexer() const { return *lexer_; }
  const GrammarLimits& limits() const { return limits_; }
  /// Bytes held now (grammar, regex terms, lexer states); grows as the lexer's DFA is built
  /// lazily, up to limits().memory_bytes.
  size_t memory_bytes() const;
  /// A readable listing (tests, debugging).
  std::string describe() const;

 private:
  friend class GrammarBuilder;
  Grammar() = default;

  std::unique_ptr<ExprStore> exprs_;
  std::vector<ExprId> lexemes_;
  std::vector<std::string> lexeme_names_;
  std::vector<std::string> rule_names_;
  std::vector<int32_t> rhs_;
  std::vector<uint32_t> production_lhs_;
  std::vector<uint32_t> rule_start_begin_;
  std::vector<uint32_t> rule_starts_;
  std::vector<uint8_t> nullable_;
  uint32_t start_dot_ = 0;
  uint32_t accept_dot_ = 0;
  GrammarLimits limits_;
  std::unique_ptr<LexerDfa> lexer_;
};

class GrammarBuilder {
 public:
  explicit GrammarBuilder(const GrammarLimits& limits = {});
  ~GrammarBuilder();

  ExprStore& exprs() { return *exprs_; }
  const CompileBudget& budget() const { return budget_; }
  /// The limit reached so far, if any (time, memory, regex terms).
  Status check_budget() const;

  /// A terminal matching `regex` (deduplicated by regex). A nullable regex gives a rule
  /// `lexeme | empty` (the lexer never matches an empty lexeme); `nothing` gives a rule
  /// without productions (never matches).
  Symbol token(ExprId regex, std::string_view name = {});
  Symbol rule(std::string_view name);
  void add(Symbol lhs, std::vector<Symbol> rhs);
  /// Rules added so far (front ends memoise by their own keys).
  size_t num_rules() const { return rule_names_.size(); }
  size_t approx_memory() const;

  /// Freezes the grammar with `start` as its start symbol.
  Result<std::shared_ptr<const Grammar>> build(Symbol start);

 private:
  GrammarLimits limits_;
  CompileBudget budget_;
  std::unique_ptr<ExprStore> exprs_;
  std::vector<ExprId> lexemes_;
  std::vector<std::string> lexeme_names_;
  std::unordered_map<ExprId, uint32_t> lexeme_of_regex_;
  std::unordered_map<ExprId, Symbol> optional_token_rule_;
  std::vector<std::string> rule_names_;
  std::vector<std::vector<std::vector<Symbol>>> productions_;
  size_t symbols_ = 0;
};

}  // namespace troupe::structured
