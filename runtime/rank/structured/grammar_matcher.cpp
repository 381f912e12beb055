#include "runtime/rank/structured/grammar_matcher.hpp"

#include "runtime/rank/structured/lexer_dfa.hpp"

namespace troupe::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), lexer_(grammar_->lexer()), parser_(*grammar_) {
  reset();
}

void GrammarMatcher::reset() {
  parser_.reset();
  state_ = lexer_.start_state(parser_.top().lexemes);
  terminated_ = false;
  history_.clear();
}

Status GrammarMatcher::status() const {
  if (!parser_.status().ok()) return parser_.status();
  return lexer_.status();
}

// Runs bytes through the lexer; where the current lexeme cannot take the next byte but
// has ended, the parser scans it and a lexeme it allows next starts with that byte.
bool GrammarMatcher::advance(std::string_view bytes) {
  for (char ch : bytes) {
    auto b = static_cast<uint8_t>(ch);
    int32_t next = lexer_.transitions(state_)[b];
    if (next == LexerDfa::kDead) {
      int32_t ended = lexer_.accept_set(state_);
      if (ended < 0 || !parser_.scan(static_cast<uint32_t>(ended))) return false;
      next = lexer_.transitions(lexer_.start_state(parser_.top().lexemes))[b];
      if (next == LexerDfa::kDead) return false;
    }
    state_ = next;
  }
  return true;
}

void GrammarMatcher::restore(const Step& step) {
  parser_.truncate(step.depth);
  parser_.drop_rows(step.depth);
  state_ = step.state;
  terminated_ = step.terminated;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  Step before{static_cast<uint32_t>(parser_.depth()), state_, terminated_};
  if (!advance(bytes)) {
    restore(before);
    return false;
  }
  history_.push_back(before);
  return true;
}

bool GrammarMatcher::accept_token(int32_t token) {
  if (terminated_) return false;
  if (vocab_->is_eog(token)) {
    if (!can_end()) return false;
    history_.push_back(Step{static_cast<uint32_t>(parser_.depth()), state_, terminated_});
    terminated_ = true;
    return true;
  }
  const std::string& bytes = vocab_->token_bytes(token);
  if (bytes.empty()) return false;
  return accept_bytes(bytes);
}

bool GrammarMatcher::can_end() {
  if (terminated_) return false;
  if (state_ == LexerDfa::kDead || lexer_.is_start(state_)) return parser_.top().accepting;
  int32_t ended = lexer_.accept_set(state_);
  if (ended < 0) return false;
  const size_t depth = parser_.depth();
  bool ok = parser_.scan(static_cast<uint32_t>(ended)) && parser_.top().accepting;
  parser_.truncate(depth);
  parser_.drop_rows(depth);
  return ok;
}

void GrammarMatcher::rollback(size_t steps) {
  if (steps == 0) return;
  if (steps > history_.size()) steps = history_.size();
  Step target = history_[history_.size() - steps];
  history_.resize(history_.size() - steps);
  restore(target);
}

}  // namespace troupe::structured
