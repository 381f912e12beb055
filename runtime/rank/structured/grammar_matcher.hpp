// One sequence's progress through a grammar: the Earley rows of the lexemes
// finished so far and the lexer's state inside the current one. Tokens are
// accepted one at a time (their bytes run through the lexer; where a lexeme
// ends the parser scans it), the token mask says which tokens may come next,
// and rollback undoes the last n tokens (speculative drafts that were not
// kept). End-of-generation tokens are allowed exactly when the text so far is a
// whole sentence of the grammar.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/rank/structured/earley_parser.hpp"
#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/lexer_dfa.hpp"
#include "runtime/rank/structured/state_mask.hpp"
#include "runtime/rank/structured/token_vocabulary.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab);

  /// Advances by one token; false (and nothing changed) when the token may not come next.
  /// An end-of-generation token is accepted when can_end(); then is_terminated().
  bool accept_token(int32_t token);
  /// Advances by raw bytes (one rollback step); false and nothing changed when they may not come.
  bool accept_bytes(std::string_view bytes);
  /// The tokens that may come next as bits ([id / 64] bit id % 64; vocab->mask_words()
  /// words). When no token can continue (a vocabulary without the bytes needed) the
  /// end-of-generation tokens are allowed so the output still ends. Errors: a limit of the
  /// grammar reached (lexer states, parser row items, work per mask).
  Status fill_mask(uint64_t* bits);
  /// The text so far is a whole sentence: end-of-generation may come.
  bool can_end();
  bool is_terminated() const { return terminated_; }
  /// Undoes the last `steps` accepted tokens (or accept_bytes calls).
  void rollback(size_t steps);
  size_t steps() const { return history_.size(); }
  void reset();
  /// A limit reached by the shared lexer or this parser.
  Status status() const;
  const Grammar& grammar() const { return *grammar_; }

 private:
  struct Step {
    uint32_t depth;   // parser chain depth before the step
    int32_t state;    // lexer state before the step
    bool terminated;
  };
  bool advance(std::string_view bytes);
  void restore(const Step& step);
  // The mask (grammar_matcher_mask.cpp).
  const StateMask* state_mask(int32_t state, std::unique_ptr<StateMask>* scratch);
  void walk_lexeme(uint32_t trie, int32_t state, std::vector<uint64_t>& bits, std::vector<StateMask::Boundary>& out);
  void walk_boundary(const StateMask::Boundary& b, uint64_t* bits);
  int64_t row_after(uint32_t ended);
  int32_t cross_boundary(int32_t state, uint8_t byte);
  bool can_end_in_walk();

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  LexerDfa& lexer_;
  EarleyParser parser_;
  int32_t state_ = 0;
  bool terminated_ = false;
  std::vector<Step> history_;
  // Mask scratch: rows built for a lexeme ending under a given row, by (row, lexeme set);
  // per trie depth the lexer state, its transitions and the parser depth.
  std::unordered_map<uint64_t, int64_t> boundary_rows_;
  std::vector<int32_t> depth_state_;
  std::vector<DfaRow> depth_row_;
  std::vector<uint32_t> depth_parser_;
  size_t mask_work_ = 0;
  uint64_t lexer_work0_ = 0;  // LexerDfa::thread_work() when the mask started
  bool timed_ = false;        // the grammar's limits bound a mask's wall time
  std::chrono::steady_clock::time_point mask_deadline_{};
  bool past_deadline() const { return timed_ && std::chrono::steady_clock::now() > mask_deadline_; }
  bool over_budget() const;
};

}  // namespace troupe::structured
