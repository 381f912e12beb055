#include "runtime/rank/structured/json_token_masker.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace troupe::structured {

// A trie node: the tokens whose text ends here, and children by next byte (sorted).
struct JsonTokenMasker::Node {
  std::vector<int32_t> tokens;
  std::vector<std::pair<uint8_t, std::unique_ptr<Node>>> children;

  Node* child(uint8_t c) {
    auto it = std::lower_bound(children.begin(), children.end(), c,
                               [](const auto& e, uint8_t b) { return e.first < b; });
    if (it == children.end() || it->first != c) it = children.emplace(it, c, std::make_unique<Node>());
    return it->second.get();
  }
};

JsonTokenMasker::JsonTokenMasker(const std::vector<std::string>& token_texts, std::vector<int32_t> eog_ids,
                                 int64_t vocab_size)
    : vocab_size_(vocab_size),
      eog_ids_(std::move(eog_ids)),
      root_(std::make_unique<Node>()),
      plain_(static_cast<size_t>((vocab_size + 63) / 64), 0),
      special_root_(std::make_unique<Node>()) {
  const int64_t n = std::min<int64_t>(vocab_size, static_cast<int64_t>(token_texts.size()));
  auto insert = [](Node* node, const std::string& text, int64_t id) {
    for (char ch : text) node = node->child(static_cast<uint8_t>(ch));
    node->tokens.push_back(static_cast<int32_t>(id));
  };
  for (int64_t id = 0; id < n; ++id) {
    const std::string& text = token_texts[static_cast<size_t>(id)];
    if (text.empty()) continue;
    insert(root_.get(), text, id);
    bool plain = true;
    for (char ch : text) plain = plain && ch != '"' && ch != '\\' && static_cast<uint8_t>(ch) >= 0x20;
    if (plain) {
      plain_[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    } else {
      insert(special_root_.get(), text, id);
    }
  }
}

JsonTokenMasker::~JsonTokenMasker() = default;

void JsonTokenMasker::walk(const Node& node, const JsonMatcher& state, std::vector<uint64_t>& bits) const {
  for (int32_t id : node.tokens) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  for (const auto& [byte, child] : node.children) {
    JsonMatcher next = state;
    if (next.feed(byte)) walk(*child, next, bits);
  }
}

const std::vector<uint64_t>& JsonTokenMasker::allowed(const JsonMatcher& state) {
  std::string key = state.key();
  if (auto it = cache_.find(key); it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  std::vector<uint64_t> bits(static_cast<size_t>((vocab_size_ + 63) / 64), 0);
  bool any = false;
  if (state.in_free_string()) {
    bits = plain_;
    any = true;
    for (const auto& [byte, child] : special_root_->children) {
      JsonMatcher next = state;
      if (next.feed(byte)) walk(*child, next, bits);
    }
  } else if (!state.complete()) {
    for (const auto& [byte, child] : root_->children) {
      JsonMatcher next = state;
      if (next.feed(byte)) walk(*child, next, bits);
    }
    for (uint64_t w : bits) any = any || w != 0;
  }
  if (state.complete() || !any) {
    for (int32_t id : eog_ids_)
      if (id >= 0 && id < vocab_size_) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  }
  if (cache_.size() >= kMaxCached) {
    cache_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(key, std::move(bits));
  cache_[std::move(key)] = lru_.begin();
  return lru_.front().second;
}

std::vector<uint64_t> JsonTokenMasker::allowed_choices(const std::vector<std::string_view>& rests, bool may_end) const {
  std::vector<uint64_t> bits(static_cast<size_t>((vocab_size_ + 63) / 64), 0);
  bool any = false;
  for (std::string_view rest : rests) {
    const Node* node = root_.get();
    for (char ch : rest) {
      const auto& kids = node->children;
      auto it = std::lower_bound(kids.begin(), kids.end(), static_cast<uint8_t>(ch),
                                 [](const auto& e, uint8_t b) { return e.first < b; });
      if (it == kids.end() || it->first != static_cast<uint8_t>(ch)) break;
      node = it->second.get();
      for (int32_t id : node->tokens) {
        bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
        any = true;
      }
    }
  }
  if (may_end || !any) {
    for (int32_t id : eog_ids_)
      if (id >= 0 && id < vocab_size_) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  }
  return bits;
}

void JsonTokenMasker::mask_choices(const std::vector<std::string_view>& rests, bool may_end, float* logits) const {
  const std::vector<uint64_t> bits = allowed_choices(rests, may_end);
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (int64_t id = 0; id < vocab_size_; ++id)
    if (!(bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1)) logits[id] = kMasked;
}

void JsonTokenMasker::mask(const JsonMatcher& state, float* logits) {
  const std::vector<uint64_t>& bits = allowed(state);
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (int64_t id = 0; id < vocab_size_; ++id)
    if (!(bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1)) logits[id] = kMasked;
}

}  // namespace troupe::structured
