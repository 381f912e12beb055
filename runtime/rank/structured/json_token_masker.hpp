// Which tokens of a vocabulary keep an output a valid JSON object, from a
// JsonMatcher state: the tokens' texts in a byte trie walked once per state
// (a subtree is pruned at its first impossible byte), the answers cached by
// state, since long outputs revisit the same few states (inside a string, after
// a value at depth d, ...); inside a string, plain-text tokens are allowed
// without a walk. End-of-generation tokens are allowed exactly when the object
// is complete, and then alone.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/rank/structured/json_matcher.hpp"

namespace troupe::structured {

class JsonTokenMasker {
 public:
  /// token_texts[id]: the bytes token id adds to the output ("" for special tokens, which
  /// are never allowed); eog_ids: the tokens that end the output. vocab_size >= token_texts.size()
  /// (ids past the texts are never allowed).
  JsonTokenMasker(const std::vector<std::string>& token_texts, std::vector<int32_t> eog_ids, int64_t vocab_size);
  ~JsonTokenMasker();

  /// Sets every disallowed entry of `logits` (vocab_size of them) to -infinity. When no
  /// token could continue (a vocabulary without the bytes needed), the end-of-generation
  /// tokens are allowed so the request still ends.
  void mask(const JsonMatcher& state, float* logits);
  /// The allowed tokens as a bit set ([id / 64] bit id % 64), computed or cached.
  const std::vector<uint64_t>& allowed(const JsonMatcher& state);
  /// A choice among fixed texts (vLLM's guided_choice): allows every token whose text is a
  /// prefix of one of `rests` (what remains of each choice the output still matches), and
  /// end-of-generation when `may_end` (the output is a whole choice) or nothing else is.
  void mask_choices(const std::vector<std::string_view>& rests, bool may_end, float* logits) const;
  /// The tokens mask_choices allows, as a bit set like allowed()'s.
  std::vector<uint64_t> allowed_choices(const std::vector<std::string_view>& rests, bool may_end) const;

  int64_t vocab_size() const { return vocab_size_; }
  size_t cached_states() const { return cache_.size(); }

 private:
  struct Node;
  void walk(const Node& node, const JsonMatcher& state, std::vector<uint64_t>& bits) const;

  int64_t vocab_size_;
  std::vector<int32_t> eog_ids_;
  std::unique_ptr<Node> root_;
  // Inside a free string most tokens are plain text (no quote, backslash or control byte) and
  // keep the state: they are allowed at once, and only the others are walked.
  std::vector<uint64_t> plain_;
  std::unique_ptr<Node> special_root_;
  // Least recently used states first out, beyond kMaxCached.
  static constexpr size_t kMaxCached = 256;
  std::list<std::pair<std::string, std::vector<uint64_t>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> cache_;
};

}  // namespace troupe::structured
