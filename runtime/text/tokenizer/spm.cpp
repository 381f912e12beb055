// SentencePiece-style BPE as llama.cpp's llm_tokenizer_spm: start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring vocabulary token, then emit each symbol (re-splitting it
// along its merge history, or as <0xNN> bytes, when it is not a token).
#include <queue>
#include <unordered_map>

#include "runtime/text/tokenizer/merge_symbols.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::tokenizer {

namespace {

struct Bigram {
  int left, right;
  float score;
  size_t size;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::encode_spm(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<Symbol> sym = utf8_symbols(text);
  if (sym.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  std::unordered_map<std::string_view, std::pair<int, int>> rev_merge;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view piece = text.substr(sym[left].offset, sym[left].n + sym[right].n);
    auto it = token_to_id_.find(piece);
    if (it == token_to_id_.end()) return;
    queue.push({left, right, vocab_.scores[it->second], piece.size()});
    rev_merge[piece] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale entry
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // Emit a symbol: as a token, else split along its merge, else as bytes.
  auto emit = [&](auto&& self, const Symbol& s) -> void {
    const std::string_view piece = text.substr(s.offset, s.n);
    auto it = token_to_id_.find(piece);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
    auto m = rev_merge.find(piece);
    if (m == rev_merge.end()) {
      for (char c : piece) {
        const int32_t id = byte_token(static_cast<uint8_t>(c));
        if (id >= 0) {
          out->push_back(id);
        } else if (vocab_.unk_id >= 0) {
          out->push_back(vocab_.unk_id);
        }
      }
      return;
    }
    self(self, sym[m->second.first]);
    self(self, sym[m->second.second]);
  };
  for (int i = 0; i != -1; i = sym[i].next) emit(emit, sym[i]);
}

}  // namespace troupe::tokenizer
