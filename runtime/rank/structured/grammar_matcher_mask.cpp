// The token mask of a GrammarMatcher: slices the lexer accepts whole are
// allowed from their bit sets; every other token is found by walking a byte
// trie depth-first from the lexer's current state, skipping a subtree at its
// first dead byte. Where a token's bytes end a lexeme, the parser scans it and
// the walk goes on in the lexeme the new row allows; rows built for the same
// (row, ended lexemes) are reused across the walk, so tokens such as `",` or
// `"},{"` cost one Earley step per distinct boundary, not per token.
#include <cstring>

#include "runtime/rank/structured/grammar_matcher.hpp"
#include "runtime/rank/structured/lexer_dfa.hpp"

namespace troupe::structured {

int32_t GrammarMatcher::cross_boundary(int32_t state, uint8_t byte) {
  int32_t ended = lexer_.accept_set(state);
  if (ended < 0) return LexerDfa::kDead;
  uint64_t key = (uint64_t{parser_.top_physical()} << 32) | static_cast<uint32_t>(ended);
  auto it = boundary_rows_.find(key);
  if (it != boundary_rows_.end()) {
    if (it->second < 0) return LexerDfa::kDead;
    parser_.push(static_cast<uint32_t>(it->second));
  } else {
    size_t before = parser_.physical_rows();
    bool ok = parser_.scan(static_cast<uint32_t>(ended));
    boundary_rows_.emplace(key, ok ? static_cast<int64_t>(parser_.top_physical()) : -1);
    if (!ok) return LexerDfa::kDead;
    mask_work_ += parser_.row(parser_.top_physical()).end - parser_.row(parser_.top_physical()).begin;
    (void)before;
  }
  return lexer_.transitions(lexer_.start_state(parser_.top().lexemes))[byte];
}

void GrammarMatcher::walk(const TokenVocabulary::Trie& trie, uint64_t* bits) {
  const TokenVocabulary::Node* nodes = trie.data();
  const auto n = static_cast<uint32_t>(trie.size());
  const auto depth0 = static_cast<uint32_t>(parser_.depth());
  frames_.clear();
  frames_.push_back(Frame{nodes[0].end, state_, lexer_.transitions(state_), depth0});
  mask_work_ += n;
  for (uint32_t i = 1; i < n;) {
    while (i >= frames_.back().end) frames_.pop_back();
    const Frame f = frames_.back();
    if (parser_.depth() != f.depth) parser_.truncate(f.depth);
    const TokenVocabulary::Node& node = nodes[i];
    int32_t next = f.row[node.byte];
    uint32_t depth = f.depth;
    if (next == LexerDfa::kDead) {
      next = cross_boundary(f.state, node.byte);
      if (next == LexerDfa::kDead) {
        i = node.end;
        continue;
      }
      depth = static_cast<uint32_t>(parser_.depth());
    }
    if (node.token >= 0) bits[static_cast<uint32_t>(node.token) >> 6] |= uint64_t{1} << (node.token & 63);
    if (node.end > i + 1) frames_.push_back(Frame{node.end, next, lexer_.transitions(next), depth});
    ++i;
  }
  parser_.truncate(depth0);
}

Status GrammarMatcher::fill_mask(uint64_t* bits) {
  const size_t words = vocab_->mask_words();
  std::memset(bits, 0, words * sizeof(uint64_t));
  TROUPE_RETURN_IF_ERROR(status());
  if (!terminated_) {
    const size_t rows0 = parser_.physical_rows();
    boundary_rows_.clear();
    mask_work_ = 0;
    const auto& slices = vocab_->slices();
    for (uint32_t s = 0; s < slices.size(); ++s) {
      if (state_ != LexerDfa::kDead && lexer_.slice_allows_all(state_, s, slices[s].automaton)) {
        const uint64_t* sb = slices[s].bits.data();
        for (size_t w = 0; w < words; ++w) bits[w] |= sb[w];
      } else {
        walk(slices[s].trie, bits);
      }
    }
    walk(vocab_->rest(), bits);
    parser_.drop_rows(rows0);
    for (auto [first, other] : vocab_->duplicates()) {
      if ((bits[static_cast<uint32_t>(first) >> 6] >> (first & 63)) & 1) {
        bits[static_cast<uint32_t>(other) >> 6] |= uint64_t{1} << (other & 63);
      }
    }
    TROUPE_RETURN_IF_ERROR(status());
    if (mask_work_ > grammar_->limits().max_mask_steps) {
      return resource_exhausted("grammar matcher: one token mask took more than " +
                                std::to_string(grammar_->limits().max_mask_steps) + " steps");
    }
  }
  bool any = false;
  for (size_t w = 0; w < words && !any; ++w) any = bits[w] != 0;
  if (can_end() || !any) {
    for (int32_t id : vocab_->eog_ids()) bits[static_cast<uint32_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  return {};
}

}  // namespace troupe::structured
