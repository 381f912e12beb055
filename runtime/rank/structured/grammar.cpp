#include "runtime/rank/structured/grammar.hpp"

#include <algorithm>

#include "runtime/rank/structured/lexer_dfa.hpp"

namespace troupe::structured {

Status CompileBudget::check(size_t memory_now) const {
  if (memory_now > limits_.memory_bytes) {
    return invalid_argument("grammar compile: memory limit of " + std::to_string(limits_.memory_bytes >> 20) +
                            " MiB reached");
  }
  if (std::chrono::steady_clock::now() > deadline_) {
    return invalid_argument("grammar compile: time limit of " + std::to_string(limits_.compile_seconds) +
                            " s reached");
  }
  return {};
}

Grammar::~Grammar() = default;

size_t Grammar::memory_bytes() const {
  return lexer_->memory_bytes() + rhs_.capacity() * 4 + production_lhs_.capacity() * 4 +
         rule_starts_.capacity() * 8 + nullable_.capacity();
}

std::string Grammar::describe() const {
  std::string out;
  for (uint32_t p = 0; p < production_lhs_.size(); ++p) {
    out += rule_names_[production_lhs_[p]] + " ->";
    // Find the production's symbols: scan back from its end marker.
    auto end = std::find(rhs_.begin(), rhs_.end(), -static_cast<int32_t>(p) - 1);
    auto begin = end;
    while (begin != rhs_.begin() && *(begin - 1) >= 0) --begin;
    for (auto it = begin; it != end; ++it) {
      int32_t s = *it;
      out += " ";
      out += s < static_cast<int32_t>(lexemes_.size()) ? "'" + lexeme_names_[static_cast<size_t>(s)] + "'"
                                                        : rule_names_[static_cast<size_t>(s) - lexemes_.size()];
    }
    out += "\n";
  }
  return out;
}

GrammarBuilder::GrammarBuilder(const GrammarLimits& limits)
    : limits_(limits), budget_(limits), exprs_(std::make_unique<ExprStore>(limits.memory_bytes / 64)) {}

GrammarBuilder::~GrammarBuilder() = default;

size_t GrammarBuilder::approx_memory() const {
  return exprs_->memory_bytes() + symbols_ * sizeof(Symbol) * 2 + rule_names_.size() * 64 + lexemes_.size() * 48;
}

Status GrammarBuilder::check_budget() const {
  if (exprs_->overflowed()) return invalid_argument("grammar compile: memory limit reached (regex terms)");
  return budget_.check(approx_memory());
}

Symbol GrammarBuilder::token(ExprId regex, std::string_view name) {
  if (exprs_->has_boolean(regex) && !exprs_->is_live(regex)) regex = ExprStore::kNothing;
  if (regex == ExprStore::kNothing) return rule("nothing");  // no productions: never matches
  if (exprs_->nullable(regex)) {
    auto it = optional_token_rule_.find(regex);
    if (it != optional_token_rule_.end()) return it->second;
    // The lexer matches only non-empty text: the empty match is the rule's second production.
    Symbol r = rule(std::string(name) + "?");
    optional_token_rule_.emplace(regex, r);
    // A regex matching only the empty string has no lexeme at all.
    Symbol t;
    bool has_nonempty = regex != ExprStore::kEmpty;
    if (has_nonempty) {
      auto found = lexeme_of_regex_.find(regex);
      uint32_t id;
      if (found != lexeme_of_regex_.end()) {
        id = found->second;
      } else {
        id = static_cast<uint32_t>(lexemes_.size());
        lexemes_.push_back(regex);
        lexeme_names_.emplace_back(name);
        lexeme_of_regex_.emplace(regex, id);
      }
      add(r, {Symbol{id, true}});
    }
    add(r, {});
    return r;
  }
  auto found = lexeme_of_regex_.find(regex);
  if (found != lexeme_of_regex_.end()) return Symbol{found->second, true};
  auto id = static_cast<uint32_t>(lexemes_.size());
  lexemes_.push_back(regex);
  lexeme_names_.emplace_back(name);
  lexeme_of_regex_.emplace(regex, id);
  return Symbol{id, true};
}

Symbol GrammarBuilder::rule(std::string_view name) {
  rule_names_.emplace_back(name);
  productions_.emplace_back();
  return Symbol{static_cast<uint32_t>(rule_names_.size() - 1), false};
}

void GrammarBuilder::add(Symbol lhs, std::vector<Symbol> rhs) {
  symbols_ += rhs.size() + 1;
  productions_[lhs.id].push_back(std::move(rhs));
}

Result<std::shared_ptr<const Grammar>> GrammarBuilder::build(Symbol start) {
  TROUPE_RETURN_IF_ERROR(check_budget());
  // The augmented start rule S' -> start.
  Symbol augmented = rule("start'");
  add(augmented, {start});
  const size_t num_rules = productions_.size();

  // Productive rules (derive some terminal string); productions using others are dropped,
  // so the parser never follows a path that cannot finish.
  std::vector<uint8_t> productive(num_rules, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < num_rules; ++r) {
      if (productive[r]) continue;
      for (const auto& prod : productions_[r]) {
        bool ok = std::all_of(prod.begin(), prod.end(), [&](Symbol s) { return s.terminal || productive[s.id]; });
        if (ok) {
          productive[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  if (!productive[augmented.id]) return invalid_argument("grammar: no text can match it (e.g. a schema that is false)");

  auto g = std::shared_ptr<Grammar>(new Grammar());
  g->limits_ = limits_;
  g->lexemes_ = lexemes_;
  g->lexeme_names_ = lexeme_names_;
  g->rule_names_ = rule_names_;
  const auto nlex = static_cast<int32_t>(lexemes_.size());
  std::vector<std::vector<uint32_t>> starts(num_rules);
  for (size_t r = 0; r < num_rules; ++r) {
    for (const auto& prod : productions_[r]) {
      bool ok = std::all_of(prod.begin(), prod.end(), [&](Symbol s) { return s.terminal || productive[s.id]; });
      if (!ok) continue;
      auto p = static_cast<uint32_t>(g->production_lhs_.size());
      g->production_lhs_.push_back(static_cast<uint32_t>(r));
      starts[r].push_back(static_cast<uint32_t>(g->rhs_.size()));
      if (r == augmented.id) g->start_dot_ = static_cast<uint32_t>(g->rhs_.size());
      for (Symbol s : prod) g->rhs_.push_back(s.terminal ? static_cast<int32_t>(s.id) : nlex + static_cast<int32_t>(s.id));
      if (r == augmented.id) g->accept_dot_ = static_cast<uint32_t>(g->rhs_.size());
      g->rhs_.push_back(-static_cast<int32_t>(p) - 1);
    }
  }
  g->rule_start_begin_.push_back(0);
  for (size_t r = 0; r < num_rules; ++r) {
    g->rule_starts_.insert(g->rule_starts_.end(), starts[r].begin(), starts[r].end());
    g->rule_start_begin_.push_back(static_cast<uint32_t>(g->rule_starts_.size()));
  }
  // Nullable rules: a fixpoint over the kept productions.
  g->nullable_.assign(num_rules, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < num_rules; ++r) {
      if (g->nullable_[r]) continue;
      for (uint32_t dot : starts[r]) {
        bool all = true;
        for (uint32_t d = dot; g->rhs_[d] >= 0 && all; ++d) {
          int32_t s = g->rhs_[d];
          all = s >= nlex && g->nullable_[static_cast<size_t>(s - nlex)];
        }
        if (all) {
          g->nullable_[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  size_t memory = approx_memory() + g->rhs_.size() * 8;
  TROUPE_RETURN_IF_ERROR(budget_.check(memory));
  g->exprs_ = std::move(exprs_);
  g->lexer_ = std::make_unique<LexerDfa>(*g->exprs_, g->lexemes_, limits_.memory_bytes > memory ? limits_.memory_bytes - memory : 0);
  exprs_ = std::make_unique<ExprStore>(16);  // the builder is spent
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace troupe::structured
