// The token mask of a GrammarMatcher, in two parts.
//
// The lexer's part depends on the lexer state alone and is cached per state
// (state_mask.hpp): vocabulary slices the state takes whole are allowed from
// their bit sets; the other tries are walked depth-first from the state, a
// dead byte skipping its whole subtree, and where a byte would end the current
// lexeme the walk records a boundary instead of going on.
//
// The parser's part is walked at every mask: below each boundary the parser
// scans the ended lexeme and the walk goes on in the lexemes the new row
// allows (nested boundaries likewise). Rows built for the same (row, ended
// lexemes) are reused across the walk, so tokens such as `",` or `"},{"` cost
// one Earley step per distinct boundary, not per token.
#include <cstring>

#include "runtime/rank/structured/grammar_matcher.hpp"
#include "runtime/rank/structured/lexer_dfa.hpp"

namespace troupe::structured {
namespace {

constexpr size_t kSparseMaskTokens = 4096;  // cached masks with fewer tokens keep their ids

inline void set_bit(uint64_t* bits, int32_t token) {
  bits[static_cast<uint32_t>(token) >> 6] |= uint64_t{1} << (token & 63);
}

}  // namespace

// The row after the lexemes of `ended` end under the top row (built once per mask walk);
// the chain is left as it was. -1 when no item expects them.
int64_t GrammarMatcher::row_after(uint32_t ended) {
  uint64_t key = (uint64_t{parser_.top_physical()} << 32) | ended;
  auto it = boundary_rows_.find(key);
  if (it != boundary_rows_.end()) return it->second;
  const size_t depth = parser_.depth();
  int64_t row = -1;
  if (parser_.scan(ended)) {
    row = parser_.top_physical();
    mask_work_ += parser_.top().end - parser_.top().begin;
    parser_.truncate(depth);
  }
  boundary_rows_.emplace(key, row);
  return row;
}

int32_t GrammarMatcher::cross_boundary(int32_t state, uint8_t byte) {
  int32_t ended = lexer_.accept_set(state);
  if (ended < 0) return LexerDfa::kDead;
  int64_t row = row_after(static_cast<uint32_t>(ended));
  if (row < 0) return LexerDfa::kDead;
  parser_.push(static_cast<uint32_t>(row));
  return lexer_.transitions(lexer_.start_state(parser_.top().lexemes))[byte];
}

bool GrammarMatcher::over_budget() const {
  const GrammarLimits& l = grammar_->limits();
  return mask_work_ > l.max_mask_steps || LexerDfa::thread_work() - lexer_work0_ > l.max_mask_derivatives ||
         past_deadline();
}

void GrammarMatcher::walk_lexeme(uint32_t t, int32_t state, std::vector<uint64_t>& bits,
                                 std::vector<StateMask::Boundary>& out) {
  const TokenVocabulary::Trie& trie = vocab_->trie(t);
  const TokenVocabulary::Node* nodes = trie.data();
  const auto n = static_cast<uint32_t>(trie.size());
  depth_state_[0] = state;
  depth_row_[0] = lexer_.transitions(state);
  uint32_t visited = 0;
  for (uint32_t i = 1; i < n; ++visited) {
    if ((visited & 4095) == 4095 && over_budget()) break;  // fill_mask reports it
    const TokenVocabulary::Node& node = nodes[i];
    const uint32_t d = node.depth;
    const int32_t next = depth_row_[d - 1][node.byte];
    if (next == LexerDfa::kDead) {
      const int32_t before = depth_state_[d - 1];
      if (lexer_.accept_set(before) >= 0) out.push_back({t, i, before});
      i = node.end;
      continue;
    }
    if (node.token >= 0) set_bit(bits.data(), node.token);
    if (node.end > i + 1) {
      depth_state_[d] = next;
      depth_row_[d] = lexer_.transitions(next);
    }
    ++i;
  }
  mask_work_ += visited;
}

const StateMask* GrammarMatcher::state_mask(int32_t state, std::unique_ptr<StateMask>* scratch) {
  const StateMask* cached = lexer_.cached_mask(state);
  if (cached && cached->vocab == vocab_.get()) return cached;
  auto m = std::make_unique<StateMask>();
  m->vocab = vocab_.get();
  std::vector<uint64_t> bits(vocab_->mask_words(), 0);
  const auto& slices = vocab_->slices();
  for (uint32_t s = 0; s < slices.size(); ++s) {
    if (lexer_.slice_allows_all(state, s, slices[s].automaton)) {
      const uint64_t* sb = slices[s].bits.data();
      for (size_t w = 0; w < bits.size(); ++w) bits[w] |= sb[w];
    } else {
      walk_lexeme(s, state, bits, m->boundaries);
    }
  }
  walk_lexeme(static_cast<uint32_t>(slices.size()), state, bits, m->boundaries);
  size_t count = 0;
  for (uint64_t w : bits) count += static_cast<size_t>(__builtin_popcountll(w));
  if (count < kSparseMaskTokens) {
    m->ids.reserve(count);
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint64_t x = bits[w]; x; x &= x - 1) m->ids.push_back(static_cast<uint32_t>(w * 64 + __builtin_ctzll(x)));
    }
  } else {
    m->bits = std::move(bits);
  }
  if (!cached && !over_budget()) {  // a walk cut short by the budget is never cached
    if (const StateMask* kept = lexer_.cache_mask(state, m)) return kept;
  }
  *scratch = std::move(m);  // not cached (over the cache budget, or another vocabulary's)
  return scratch->get();
}

void GrammarMatcher::walk_boundary(const StateMask::Boundary& b, uint64_t* bits) {
  const TokenVocabulary::Trie& trie = vocab_->trie(b.trie);
  const TokenVocabulary::Node* nodes = trie.data();
  const size_t depth0 = parser_.depth();
  const TokenVocabulary::Node& top = nodes[b.node];
  int32_t next = cross_boundary(b.state, top.byte);
  if (next != LexerDfa::kDead) {
    if (top.token >= 0) set_bit(bits, top.token);
    const uint32_t dj = top.depth;
    depth_state_[dj] = next;
    depth_row_[dj] = lexer_.transitions(next);
    depth_parser_[dj] = static_cast<uint32_t>(parser_.depth());
    uint32_t visited = 0;
    for (uint32_t i = b.node + 1; i < top.end; ++visited) {
      if ((visited & 4095) == 4095 && over_budget()) break;  // fill_mask reports it
      const TokenVocabulary::Node& node = nodes[i];
      const uint32_t d = node.depth;
      if (parser_.depth() != depth_parser_[d - 1]) parser_.truncate(depth_parser_[d - 1]);
      int32_t to = depth_row_[d - 1][node.byte];
      if (to == LexerDfa::kDead) {
        to = cross_boundary(depth_state_[d - 1], node.byte);
        if (to == LexerDfa::kDead) {
          i = node.end;
          continue;
        }
      }
      if (node.token >= 0) set_bit(bits, node.token);
      if (node.end > i + 1) {
        depth_state_[d] = to;
        depth_row_[d] = lexer_.transitions(to);
        depth_parser_[d] = static_cast<uint32_t>(parser_.depth());
      }
      ++i;
    }
    mask_work_ += visited + 1;
  }
  parser_.truncate(depth0);
}

// End-of-generation: the text so far is a whole sentence (the current lexeme, if
// started, ended and scanned).
bool GrammarMatcher::can_end_in_walk() {
  if (state_ == LexerDfa::kDead || lexer_.is_start(state_)) return parser_.top().accepting;
  int32_t ended = lexer_.accept_set(state_);
  if (ended < 0) return false;
  int64_t row = row_after(static_cast<uint32_t>(ended));
  return row >= 0 && parser_.row(static_cast<uint32_t>(row)).accepting;
}

Status GrammarMatcher::fill_mask(uint64_t* bits) {
  const size_t words = vocab_->mask_words();
  std::memset(bits, 0, words * sizeof(uint64_t));
  TROUPE_RETURN_IF_ERROR(status());
  bool ends = false;
  if (!terminated_) {
    const size_t rows0 = parser_.physical_rows();
    const size_t depth0 = parser_.depth();
    boundary_rows_.clear();
    mask_work_ = 0;
    lexer_work0_ = LexerDfa::thread_work();
    const double seconds = grammar_->limits().max_mask_seconds;
    timed_ = seconds > 0;
    if (timed_) {
      mask_deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                              std::chrono::duration<double>(seconds));
    }
    const size_t depths = vocab_->max_token_bytes() + 2;
    if (depth_state_.size() < depths) {
      depth_state_.resize(depths);
      depth_row_.resize(depths);
      depth_parser_.resize(depths);
    }
    if (state_ != LexerDfa::kDead) {
      std::unique_ptr<StateMask> scratch;
      const StateMask* m = state_mask(state_, &scratch);
      if (!m->bits.empty()) {
        for (size_t w = 0; w < words; ++w) bits[w] |= m->bits[w];
      }
      for (uint32_t id : m->ids) set_bit(bits, static_cast<int32_t>(id));
      for (const StateMask::Boundary& b : m->boundaries) walk_boundary(b, bits);
    }
    ends = can_end_in_walk();
    parser_.truncate(depth0);
    parser_.drop_rows(rows0);
    for (auto [first, other] : vocab_->duplicates()) {
      if ((bits[static_cast<uint32_t>(first) >> 6] >> (first & 63)) & 1) set_bit(bits, other);
    }
    TROUPE_RETURN_IF_ERROR(status());
    if (past_deadline()) {
      return resource_exhausted("grammar matcher: one token mask went over its time limit of " +
                                std::to_string(static_cast<int64_t>(grammar_->limits().max_mask_seconds * 1000 + 0.5)) +
                                " ms");
    }
    if (over_budget()) {
      return resource_exhausted("grammar matcher: one token mask went over its limit of " +
                                std::to_string(grammar_->limits().max_mask_steps) + " steps or " +
                                std::to_string(grammar_->limits().max_mask_derivatives) + " regex derivatives");
    }
  }
  bool any = false;
  for (size_t w = 0; w < words && !any; ++w) any = bits[w] != 0;
  if (ends || !any) {
    for (int32_t id : vocab_->eog_ids()) set_bit(bits, id);
  }
  return {};
}

}  // namespace troupe::structured
