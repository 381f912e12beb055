// The lexer of a grammar: a DFA over bytes built lazily from the lexemes'
// regexes by derivatives. A state is the set of lexemes still possible with
// what remains of each (lexeme, derivative term); the start state of a set of
// lexemes (those the parser allows next) matches nothing yet, so no lexeme is
// ever empty. A state's 256 transitions are computed together, one derivative
// per byte class, the first time the state is entered; afterwards a transition
// is one array read. Lexing is greedy: a lexeme ends only when the next byte
// cannot extend it.
//
// Shared by every matcher of the grammar and across threads: states and lexeme
// sets live in chunked arrays that never move; new ones are made under a mutex
// and published with release order, so reads of built states take no lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/rank/structured/chunked_vector.hpp"
#include "runtime/rank/structured/regex_expr.hpp"
#include "runtime/rank/structured/state_mask.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

/// A small DFA of a vocabulary slice's byte language (see token_vocabulary.hpp): next[s][b]
/// is the state after byte b, or -1.
struct SliceAutomaton {
  std::vector<std::array<int16_t, 256>> next;
  uint32_t max_bytes = 0;  // the slice's longest token
};

/// A state's transitions: a byte's class, then the class's target state. Class maps are
/// shared between states, so a state costs a few words per class instead of 256.
struct DfaRow {
  const uint8_t* cls;
  const int32_t* to;
  int32_t operator[](uint8_t b) const { return to[cls[b]]; }
};

/// A set of lexemes: sorted members and a bit set over all lexemes.
struct LexemeSet {
  std::vector<uint32_t> members;
  std::vector<uint64_t> bits;
  mutable std::atomic<int32_t> start_state{-1};  // cached by LexerDfa::start_state
  bool has(uint32_t lexeme) const { return lexeme / 64 < bits.size() && ((bits[lexeme / 64] >> (lexeme % 64)) & 1); }
};

class LexerDfa {
 public:
  static constexpr int32_t kDead = 0;
  static constexpr uint32_t kEmptySet = 0;

  LexerDfa(ExprStore& exprs, const std::vector<ExprId>& lexemes, size_t memory_budget);

  /// The id of a set of lexemes (sorted, unique).
  uint32_t intern_set(const std::vector<uint32_t>& sorted_lexemes);
  const LexemeSet& set(uint32_t id) const { return sets_[id]; }
  /// The state before any byte of a lexeme from the set (kDead for the empty set).
  int32_t start_state(uint32_t set_id);
  /// The transitions of `state` (computed on first use).
  DfaRow transitions(int32_t state) {
    const State& s = states_[static_cast<size_t>(state)];
    if (!s.ready.load(std::memory_order_acquire)) build_transitions(state);
    return DfaRow{s.cls, s.to.get()};
  }
  /// The set of lexemes that end at `state` (-1 when none does).
  int32_t accept_set(int32_t state) const { return states_[static_cast<size_t>(state)].accept_set; }
  bool is_start(int32_t state) const { return states_[static_cast<size_t>(state)].start; }
  /// Every byte string of the slice's language up to its longest token stays inside the
  /// current lexeme from `state` (never reaches a dead transition). Cached per state.
  bool slice_allows_all(int32_t state, uint32_t slice, const SliceAutomaton& automaton);

  /// The mask part cached for `state` (state_mask.hpp), or null.
  const StateMask* cached_mask(int32_t state) const {
    return states_[static_cast<size_t>(state)].mask.load(std::memory_order_acquire);
  }
  /// Takes `mask` for `state` unless the cache is over its budget (then `mask` is left as it
  /// was); returns the mask cached for the state (this one, or one another thread stored
  /// first), or null.
  const StateMask* cache_mask(int32_t state, std::unique_ptr<StateMask>& mask);

  /// Derivatives this thread has taken building states of any lexer (looked up or
  /// computed; monotonic): a mask's share of the lexer's work is the difference over it.
  static uint64_t thread_work();

  /// ok, or the limit the DFA reached (it then stops growing: transitions to states it
  /// could not make are dead, which only ever removes tokens).
  Status status() const;
  size_t num_states() const { return states_.size(); }
  /// Bytes held by the DFA and the regex terms (which it extends), under its lock.
  size_t memory_bytes() const;
  /// "{lexeme: term, ...}" for debugging.
  std::string describe_state(int32_t state);

 private:
  struct State {
    std::atomic<bool> ready{false};
    bool start = false;
    int32_t accept_set = -1;
    uint32_t items_begin = 0, items_count = 0;
    std::atomic<uint32_t> slices_known{0}, slices_pass{0};
    std::atomic<const StateMask*> mask{nullptr};
    const uint8_t* cls = nullptr;    // shared class map (256 bytes)
    std::unique_ptr<int32_t[]> to;   // target per class
  };
  struct Item {
    uint32_t lexeme;
    ExprId expr;
    bool operator==(const Item& o) const { return lexeme == o.lexeme && expr == o.expr; }
  };

  int32_t intern_state(const std::vector<Item>& items, bool start);  // mutex held
  uint32_t intern_set_locked(const std::vector<uint32_t>& sorted);
  void build_transitions(int32_t state);
  bool over_budget() const;

  ExprStore& exprs_;
  std::vector<ExprId> lexemes_;
  size_t memory_budget_;
  mutable std::mutex mutex_;
  ChunkedVector<State> states_;
  ChunkedVector<LexemeSet> sets_;
  std::vector<Item> items_;  // states' items, under the mutex
  std::vector<std::unique_ptr<StateMask>> masks_;  // owned here, under the mutex
  std::unordered_map<std::string, std::unique_ptr<uint8_t[]>> class_maps_;  // under the mutex
  size_t transition_bytes_ = 0;
  size_t mask_bytes_ = 0;
  std::unordered_map<std::string, int32_t> state_ids_;
  std::unordered_map<std::string, uint32_t> set_ids_;
  std::string limit_reached_;  // under the mutex
  std::atomic<bool> limited_{false};
};

}  // namespace troupe::structured
