#include "runtime/rank/structured/earley_parser.hpp"

#include <algorithm>

#include "runtime/rank/structured/lexer_dfa.hpp"

namespace troupe::structured {
namespace {

uint64_t hash_key(uint64_t k) {
  k *= 0x9E3779B97F4A7C15ULL;
  return k ^ (k >> 31);
}

}  // namespace

EarleyParser::EarleyParser(const Grammar& grammar)
    : g_(grammar),
      nlex_(static_cast<int32_t>(grammar.num_lexemes())),
      table_keys_(256),
      table_stamps_(256, 0),
      predicted_(grammar.num_rules(), 0),
      done_keys_(256),
      done_stamps_(256, 0),
      lexeme_stamps_(grammar.num_lexemes(), 0) {
  reset();
}

void EarleyParser::reset() {
  items_.clear();
  rows_.clear();
  chain_.clear();
  status_ = {};
  row_begin_ = 0;
  ++stamp_;
  allowed_.clear();
  accepting_ = false;
  done_count_ = 0;
  chain_.push_back(0);
  add(g_.start_dot(), 0);
  rows_.push_back(Row{});
  close(0);
}

void EarleyParser::drop_rows(size_t count) {
  if (count >= rows_.size()) return;
  items_.resize(rows_[count].begin);
  rows_.resize(count);
}

void EarleyParser::grow_table() {
  std::vector<uint64_t> keys(table_keys_.size() * 2);
  std::vector<uint32_t> stamps(keys.size(), 0);
  size_t mask = keys.size() - 1;
  for (uint32_t i = row_begin_; i < items_.size(); ++i) {
    uint64_t k = (uint64_t{items_[i].dot} << 32) | items_[i].origin;
    size_t s = hash_key(k) & mask;
    while (stamps[s] == stamp_) s = (s + 1) & mask;
    keys[s] = k;
    stamps[s] = stamp_;
  }
  table_keys_.swap(keys);
  table_stamps_.swap(stamps);
}

// Adds an item to the row being built unless it is there; false when it was.
bool EarleyParser::add(uint32_t dot, uint32_t origin) {
  uint64_t k = (uint64_t{dot} << 32) | origin;
  size_t mask = table_keys_.size() - 1;
  size_t s = hash_key(k) & mask;
  while (table_stamps_[s] == stamp_) {
    if (table_keys_[s] == k) return false;
    s = (s + 1) & mask;
  }
  table_keys_[s] = k;
  table_stamps_[s] = stamp_;
  items_.push_back({dot, origin});
  if (dot == g_.accept_dot() && origin == 0) accepting_ = true;
  if ((items_.size() - row_begin_) * 2 > table_keys_.size()) grow_table();
  return true;
}

// Records a completed (rule, origin) pair; false when it was already done in this row.
bool EarleyParser::mark_done(uint64_t key) {
  size_t mask = done_keys_.size() - 1;
  size_t s = hash_key(key) & mask;
  while (done_stamps_[s] == stamp_) {
    if (done_keys_[s] == key) return false;
    s = (s + 1) & mask;
  }
  done_keys_[s] = key;
  done_stamps_[s] = stamp_;
  if (++done_count_ * 2 > done_keys_.size()) {
    std::vector<uint64_t> keep;
    for (size_t t = 0; t < done_keys_.size(); ++t) {
      if (done_stamps_[t] == stamp_) keep.push_back(done_keys_[t]);
    }
    done_keys_.assign(done_keys_.size() * 2, 0);
    done_stamps_.assign(done_keys_.size(), 0);
    mask = done_keys_.size() - 1;
    for (uint64_t k : keep) {
      size_t t = hash_key(k) & mask;
      while (done_stamps_[t] == stamp_) t = (t + 1) & mask;
      done_keys_[t] = k;
      done_stamps_[t] = stamp_;
    }
  }
  return true;
}

bool EarleyParser::close(uint32_t position) {
  const std::vector<int32_t>& rhs = g_.rhs();
  const size_t max_items = g_.limits().max_row_items;
  for (uint32_t i = row_begin_; i < items_.size(); ++i) {
    if (items_.size() - row_begin_ > max_items) {
      status_ = resource_exhausted("grammar parser: more than " + std::to_string(max_items) +
                                   " Earley items at one lexeme boundary");
      return false;
    }
    const Item item = items_[i];
    const int32_t sym = rhs[item.dot];
    if (sym < 0) {  // complete: advance the items of the origin row that wait for the rule
      if (item.origin == position) continue;  // an empty completion: done at prediction
      const uint32_t lhs = g_.production_lhs(static_cast<uint32_t>(-sym - 1));
      if (!mark_done((uint64_t{lhs} << 32) | item.origin)) continue;
      const Row& origin = rows_[chain_[item.origin]];
      const int32_t want = nlex_ + static_cast<int32_t>(lhs);
      for (uint32_t j = origin.begin; j < origin.end; ++j) {
        const Item o = items_[j];
        if (rhs[o.dot] == want) add(o.dot + 1, o.origin);
      }
    } else if (sym >= nlex_) {  // predict the rule; a nullable one is also skipped over
      const auto r = static_cast<uint32_t>(sym - nlex_);
      if (predicted_[r] != stamp_) {
        predicted_[r] = stamp_;
        uint32_t count = 0;
        const uint32_t* starts = g_.rule_starts(r, &count);
        for (uint32_t k = 0; k < count; ++k) add(starts[k], position);
      }
      if (g_.nullable(r)) add(item.dot + 1, item.origin);
    } else {  // a lexeme the next boundary may bring
      const auto l = static_cast<uint32_t>(sym);
      if (lexeme_stamps_[l] != stamp_) {
        lexeme_stamps_[l] = stamp_;
        allowed_.push_back(l);
      }
    }
  }
  Row& row = rows_.back();
  row.begin = row_begin_;
  row.end = static_cast<uint32_t>(items_.size());
  row.accepting = accepting_;
  std::sort(allowed_.begin(), allowed_.end());
  row.lexemes = g_.lexer().intern_set(allowed_);
  return true;
}

bool EarleyParser::scan(uint32_t lexeme_set) {
  if (!status_.ok()) return false;
  const LexemeSet& set = g_.lexer().set(lexeme_set);
  const Row prev = top();
  const std::vector<int32_t>& rhs = g_.rhs();
  ++stamp_;
  if (stamp_ == 0) {  // wrapped: clear the stamps once
    std::fill(table_stamps_.begin(), table_stamps_.end(), 0);
    std::fill(predicted_.begin(), predicted_.end(), 0);
    std::fill(done_stamps_.begin(), done_stamps_.end(), 0);
    std::fill(lexeme_stamps_.begin(), lexeme_stamps_.end(), 0);
    stamp_ = 1;
  }
  row_begin_ = static_cast<uint32_t>(items_.size());
  allowed_.clear();
  accepting_ = false;
  done_count_ = 0;
  for (uint32_t j = prev.begin; j < prev.end; ++j) {
    const Item it = items_[j];
    const int32_t sym = rhs[it.dot];
    if (sym >= 0 && sym < nlex_ && set.has(static_cast<uint32_t>(sym))) add(it.dot + 1, it.origin);
  }
  if (items_.size() == row_begin_) return false;
  const auto position = static_cast<uint32_t>(chain_.size());
  rows_.push_back(Row{});
  chain_.push_back(static_cast<uint32_t>(rows_.size() - 1));
  if (!close(position)) {
    chain_.pop_back();
    rows_.pop_back();
    items_.resize(row_begin_);
    return false;
  }
  return true;
}

}  // namespace troupe::structured
