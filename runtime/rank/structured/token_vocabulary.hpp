// A tokenizer's vocabulary as token masks need it, built once per vocabulary
// and shared by every grammar: the tokens' bytes in byte tries laid out flat
// in depth-first order (a node's subtree is the index range up to its `end`,
// so a dead byte skips the whole subtree in one step), split into slices.
//
// A slice is the set of tokens made only of characters of a class (ASCII word
// characters; text that may stand raw inside a JSON string, up to 16 bytes and
// longer), each token in the first slice that takes it.
// When the lexer can take any string of a slice's class from its current state
// without a lexeme ending (LexerDfa::slice_allows_all), the slice's tokens are
// allowed at once from a precomputed bit set; inside a JSON string that is most
// of the vocabulary, and only the remaining tokens are walked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/rank/structured/lexer_dfa.hpp"

namespace troupe::structured {

class TokenVocabulary {
 public:
  struct Node {
    uint32_t end;    // one past the last node of this node's subtree
    int32_t token;   // the token whose bytes end here, or -1
    uint16_t depth;  // bytes from the root (the root is 0)
    uint8_t byte;    // the byte leading here from the parent (unused at the root)
  };
  /// Longer tokens are left out of the tries (never allowed under a grammar).
  static constexpr size_t kMaxTokenBytes = 1024;
  using Trie = std::vector<Node>;  // [0] is the root
  struct Slice {
    std::string name;
    uint32_t max_bytes = 0;  // its longest token
    SliceAutomaton automaton;
    std::vector<uint64_t> bits;  // the slice's tokens
    Trie trie;
    size_t count = 0;
  };

  /// token_bytes[id]: the bytes token id adds to the output ("" for tokens that are never
  /// allowed, e.g. control tokens); eog_ids: the tokens that end the output (allowed
  /// exactly when the grammar accepts). Ids up to vocab_size (the logits' width) past
  /// token_bytes are never allowed.
  static std::shared_ptr<const TokenVocabulary> create(std::vector<std::string> token_bytes,
                                                       std::vector<int32_t> eog_ids, int64_t vocab_size);

  int64_t vocab_size() const { return vocab_size_; }
  size_t mask_words() const { return static_cast<size_t>((vocab_size_ + 63) / 64); }
  const std::string& token_bytes(int32_t id) const;
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  const std::vector<Slice>& slices() const { return slices_; }
  /// The tokens in no slice.
  const Trie& rest() const { return rest_; }
  /// Trie t: slices()[t].trie, or rest() for t == slices().size().
  const Trie& trie(uint32_t t) const { return t < slices_.size() ? slices_[t].trie : rest_; }
  size_t max_token_bytes() const { return max_token_bytes_; }
  /// (first, other) ids of tokens with the same bytes: `other` is allowed with `first`.
  const std::vector<std::pair<int32_t, int32_t>>& duplicates() const { return duplicates_; }
  size_t memory_bytes() const;

 private:
  TokenVocabulary() = default;

  int64_t vocab_size_ = 0;
  std::vector<std::string> token_bytes_;
  std::vector<int32_t> eog_ids_;
  std::vector<uint8_t> is_eog_;
  std::vector<Slice> slices_;
  Trie rest_;
  size_t max_token_bytes_ = 0;
  std::vector<std::pair<int32_t, int32_t>> duplicates_;
};

}  // namespace troupe::structured
