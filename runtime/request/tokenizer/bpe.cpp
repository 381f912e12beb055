// Byte-level BPE as llama.cpp's llm_tokenizer_bpe: pre-tokenize, map bytes to
// visible code points, then merge adjacent symbols by merge rank (lowest
// first, leftmost on ties) within each pre-token.
#include <queue>

#include "runtime/request/tokenizer/pretokenize.hpp"
#include "runtime/request/tokenizer/merge_symbols.hpp"
#include "runtime/request/tokenizer/tokenizer.hpp"
#include "runtime/request/tokenizer/unicode.hpp"

namespace troupe::tokenizer {

namespace {

struct Bigram {
  int left, right;
  int rank;
  size_t size;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

int Tokenizer::find_merge_rank(std::string_view left, std::string_view right) const {
  thread_local std::string key;  // reused: this runs once per candidate pair
  key.clear();
  key.append(left).push_back(' ');
  key.append(right);
  auto it = merge_rank_.find(key);
  return it == merge_rank_.end() ? -1 : it->second;
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>* out) const {
  for (const std::string& chunk : pre_tokenize(vocab_.pre, text)) bpe_word(bytes_to_bpe_text(chunk), out);
}

void Tokenizer::bpe_word(const std::string& word, std::vector<int32_t>* out) const {
  if (vocab_.ignore_merges) {
    auto it = token_to_id_.find(word);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> sym = utf8_symbols(word);
  if (sym.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const std::string_view w(word);
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int rank = find_merge_rank(w.substr(sym[left].offset, sym[left].n), w.substr(sym[right].offset, sym[right].n));
    if (rank < 0) return;
    queue.push({left, right, rank, sym[left].n + sym[right].n});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    // Stale when either side has changed since the pair was queued (symbols are contiguous).
    if (l.n == 0 || r.n == 0 || l.next != b.right || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = w.substr(sym[i].offset, sym[i].n);
    auto it = token_to_id_.find(piece);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      continue;
    }
    // Not a token: fall back to one token per byte of the mapped text, where they exist.
    for (char c : piece) {
      auto bt = token_to_id_.find(std::string_view(&c, 1));
      if (bt != token_to_id_.end()) out->push_back(bt->second);
    }
  }
}

}  // namespace troupe::tokenizer
