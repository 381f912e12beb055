// An Earley parser over lexemes: one row of items (production, dot, origin
// row) per lexeme boundary. Earley handles any context-free grammar: left
// recursion, ambiguity and empty rules (nullable rules are advanced over when
// predicted, as Aycock and Horspool do). A row records which lexemes may come
// next (the lexer's start state for it) and whether the input so far is a
// whole sentence.
//
// Rows are stored once (physical rows) and a sentence is a chain of them: the
// mask walk pushes rows for lexemes a token would end and pops them again, and
// may push a row it built before for the same chain and lexemes (memoised by
// the caller). Rollback truncates the chain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/rank/structured/grammar.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

class EarleyParser {
 public:
  struct Item {
    uint32_t dot;     // index into Grammar::rhs()
    uint32_t origin;  // the chain position where the production started
  };
  struct Row {
    uint32_t begin = 0, end = 0;  // items
    uint32_t lexemes = 0;         // the lexer's set of the lexemes allowed next
    bool accepting = false;       // the input so far is a whole sentence
  };

  explicit EarleyParser(const Grammar& grammar);

  /// Back to the first row (the start rule predicted).
  void reset();
  /// Scans the lexemes of `lexeme_set` (a LexerDfa set) after the top row and pushes the new
  /// row; false (nothing pushed) when no item expects any of them or a limit was reached.
  bool scan(uint32_t lexeme_set);
  /// Pushes an already built physical row (built after the current top for the same set).
  void push(uint32_t physical) { chain_.push_back(physical); }

  const Row& top() const { return rows_[chain_.back()]; }
  uint32_t top_physical() const { return chain_.back(); }
  const Row& row(uint32_t physical) const { return rows_[physical]; }
  size_t depth() const { return chain_.size(); }
  void truncate(size_t depth) { chain_.resize(depth); }
  size_t physical_rows() const { return rows_.size(); }
  /// Drops physical rows from `count` on (rows the chain no longer uses).
  void drop_rows(size_t count);

  /// ok, or the limit a row reached.
  const Status& status() const { return status_; }
  size_t memory_bytes() const { return items_.capacity() * sizeof(Item) + rows_.capacity() * sizeof(Row); }

 private:
  bool add(uint32_t dot, uint32_t origin);
  bool close(uint32_t position);
  bool mark_done(uint64_t key);  // completes and predicts items_[row_begin_..]; false on a limit
  void grow_table();

  const Grammar& g_;
  const int32_t nlex_;
  std::vector<Item> items_;
  std::vector<Row> rows_;
  std::vector<uint32_t> chain_;
  Status status_;
  // Scratch for building one row: a stamped hash set of items, predicted rules, completed
  // (rule, origin) pairs and the lexemes seen.
  uint32_t row_begin_ = 0;
  uint32_t stamp_ = 0;
  std::vector<uint64_t> table_keys_;
  std::vector<uint32_t> table_stamps_;
  std::vector<uint32_t> predicted_;
  std::vector<uint64_t> done_keys_;
  std::vector<uint32_t> done_stamps_;
  size_t done_count_ = 0;
  std::vector<uint32_t> lexeme_stamps_;
  std::vector<uint32_t> allowed_;
  bool accepting_ = false;
};

}  // namespace troupe::structured
