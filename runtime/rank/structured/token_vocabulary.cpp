#include "runtime/rank/structured/token_vocabulary.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "runtime/rank/structured/codepoint_set.hpp"

namespace troupe::structured {
namespace {

using Entry = std::pair<std::string_view, int32_t>;

// Builds the subtree of the entries [lo, hi) sharing `depth` leading bytes under `node`.
void build_subtree(const std::vector<Entry>& e, size_t lo, size_t hi, size_t depth, uint32_t node,
                   TokenVocabulary::Trie& trie, std::vector<std::pair<int32_t, int32_t>>& dups) {
  size_t i = lo;
  if (i < hi && e[i].first.size() == depth) {
    trie[node].token = e[i].second;
    for (++i; i < hi && e[i].first.size() == depth; ++i) dups.emplace_back(e[lo].second, e[i].second);
  }
  while (i < hi) {
    auto c = static_cast<uint8_t>(e[i].first[depth]);
    size_t j = i;
    while (j < hi && static_cast<uint8_t>(e[j].first[depth]) == c) ++j;
    auto child = static_cast<uint32_t>(trie.size());
    trie.push_back({0, -1, static_cast<uint16_t>(depth + 1), c});
    build_subtree(e, i, j, depth + 1, child, trie, dups);
    i = j;
  }
  trie[node].end = static_cast<uint32_t>(trie.size());
}

TokenVocabulary::Trie build_trie(std::vector<Entry> entries, std::vector<std::pair<int32_t, int32_t>>& dups) {
  std::sort(entries.begin(), entries.end());
  TokenVocabulary::Trie trie;
  trie.push_back({0, -1, 0, 0});
  build_subtree(entries, 0, entries.size(), 0, 0, trie, dups);
  return trie;
}

// The byte DFA of C* for a character class C (states: the derivatives).
SliceAutomaton automaton_of(const CodepointSet& chars, uint32_t max_bytes) {
  ExprStore store;
  ExprId start = store.star(utf8_expr(store, chars));
  std::vector<ExprId> states{start};
  std::map<ExprId, int16_t> index{{start, 0}};
  SliceAutomaton a;
  a.max_bytes = max_bytes;
  for (size_t s = 0; s < states.size(); ++s) {
    std::array<int16_t, 256> next;
    next.fill(-1);
    for (int b = 0; b < 256; ++b) {
      ExprId d = store.derivative(states[s], static_cast<uint8_t>(b));
      if (d == ExprStore::kNothing) continue;
      auto [it, fresh] = index.emplace(d, static_cast<int16_t>(states.size()));
      if (fresh) states.push_back(d);
      next[static_cast<size_t>(b)] = it->second;
    }
    a.next.push_back(next);
  }
  return a;
}

// The token is a whole number of the automaton's characters (it ends in its start state).
bool in_language(const SliceAutomaton& a, std::string_view bytes) {
  int16_t s = 0;
  for (char c : bytes) {
    s = a.next[static_cast<size_t>(s)][static_cast<uint8_t>(c)];
    if (s < 0) return false;
  }
  return s == 0;
}

}  // namespace

std::shared_ptr<const TokenVocabulary> TokenVocabulary::create(std::vector<std::string> token_bytes,
                                                               std::vector<int32_t> eog_ids, int64_t vocab_size) {
  auto v = std::shared_ptr<TokenVocabulary>(new TokenVocabulary());
  v->vocab_size_ = vocab_size;
  if (static_cast<int64_t>(token_bytes.size()) > vocab_size) token_bytes.resize(static_cast<size_t>(vocab_size));
  v->token_bytes_ = std::move(token_bytes);
  v->is_eog_.assign(static_cast<size_t>(vocab_size), 0);
  for (int32_t id : eog_ids) {
    if (id >= 0 && id < vocab_size && !v->is_eog_[static_cast<size_t>(id)]) {
      v->is_eog_[static_cast<size_t>(id)] = 1;
      v->eog_ids_.push_back(id);
    }
  }
  CodepointSet word = CodepointSet::range('a', 'z');
  word.add('A', 'Z');
  word.add('0', '9');
  word.add('_');
  CodepointSet text = CodepointSet::range(0x20, CodepointSet::kMax).minus(CodepointSet::of('"')).minus(CodepointSet::of('\\'));
  // Short slices first: a lexer state with a bounded length left (a maxLength string) still
  // takes them whole.
  constexpr uint32_t kShort = 16;
  v->slices_.push_back(Slice{"word", kShort, automaton_of(word, kShort), {}, {}, 0});
  v->slices_.push_back(Slice{"json_text", kShort, automaton_of(text, kShort), {}, {}, 0});
  v->slices_.push_back(Slice{"json_text_long", 128, automaton_of(text, 128), {}, {}, 0});

  std::vector<std::vector<Entry>> per_slice(v->slices_.size());
  std::vector<Entry> rest;
  for (size_t id = 0; id < v->token_bytes_.size(); ++id) {
    const std::string& t = v->token_bytes_[id];
    if (t.empty() || v->is_eog_[id] || t.size() > kMaxTokenBytes) continue;
    v->max_token_bytes_ = std::max(v->max_token_bytes_, t.size());
    Entry e{t, static_cast<int32_t>(id)};
    bool placed = false;
    for (size_t s = 0; s < v->slices_.size() && !placed; ++s) {
      if (t.size() <= v->slices_[s].max_bytes && in_language(v->slices_[s].automaton, t)) {
        per_slice[s].push_back(e);
        placed = true;
      }
    }
    if (!placed) rest.push_back(e);
  }
  for (size_t s = 0; s < v->slices_.size(); ++s) {
    Slice& slice = v->slices_[s];
    slice.bits.assign(v->mask_words(), 0);
    for (const Entry& e : per_slice[s]) slice.bits[static_cast<size_t>(e.second) / 64] |= uint64_t{1} << (e.second % 64);
    slice.count = per_slice[s].size();
    slice.trie = build_trie(per_slice[s], v->duplicates_);
  }
  v->rest_ = build_trie(rest, v->duplicates_);
  return v;
}

const std::string& TokenVocabulary::token_bytes(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && static_cast<size_t>(id) < token_bytes_.size() ? token_bytes_[static_cast<size_t>(id)] : kNone;
}

bool TokenVocabulary::is_eog(int32_t id) const {
  return id >= 0 && id < vocab_size_ && is_eog_[static_cast<size_t>(id)] != 0;
}

size_t TokenVocabulary::memory_bytes() const {
  size_t n = rest_.capacity() * sizeof(Node) + is_eog_.capacity();
  for (const auto& t : token_bytes_) n += t.capacity() + sizeof(std::string);
  for (const auto& s : slices_) n += s.trie.capacity() * sizeof(Node) + s.bits.capacity() * 8;
  return n;
}

}  // namespace troupe::structured
