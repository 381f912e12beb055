// Byte-level BPE as llama.cpp's llm_tokenizer_bpe: pre-tokenize, map bytes to
// visible code points, then merge adjacent symbols by merge rank (lowest
// first, leftmost on ties) within each pre-token.
#include <algorithm>
#include <queue>

#include "runtime/text/tokenizer/pretokenize.hpp"
#include "runtime/text/tokenizer/merge_symbols.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/unicode_nfc.hpp"
#include "runtime/text/tokenizer/unicode.hpp"

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
  key.append(left).push_back('\0');
  key.append(right);
  auto it = merge_rank_.find(key);
  return it == merge_rank_.end() ? -1 : it->second;
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>* out) const {
  for (const std::string& chunk : pre_tokenize(vocab_.pre, text)) bpe_word(bytes_to_bpe_text(chunk), out);
}

namespace {

void replace_all(std::string* s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = s->find(from); pos != std::string::npos; pos = s->find(from, pos + to.size())) {
    s->replace(pos, from.size(), to);
  }
}

}  // namespace

// A tokenizer.json BPE: normalizer, pre-tokenizer, then BPE per chunk, as
// Hugging Face's tokenizers runs them on one segment between added tokens.
void Tokenizer::encode_hf_bpe(std::string_view text, bool at_start, std::vector<int32_t>* out) const {
  const HfBpeConfig& hf = vocab_.hf;
  std::string s(text);
  for (const HfBpeConfig::Step& step : hf.normalizer) {
    switch (step.kind) {
      case HfBpeConfig::Step::Kind::nfc: s = nfc(s); break;
      case HfBpeConfig::Step::Kind::replace: replace_all(&s, step.from, step.to); break;
      case HfBpeConfig::Step::Kind::prepend:
        if (!s.empty()) s.insert(0, step.to);
        break;
    }
  }
  if (hf.byte_level) {
    if (hf.byte_level_prefix_space && !s.empty() && s[0] != ' ') s.insert(0, 1, ' ');
    if (!hf.split) {
      bpe_word(bytes_to_bpe_text(s), out);
      return;
    }
    for (const std::string& chunk : pre_tokenize(vocab_.pre, s)) bpe_word(bytes_to_bpe_text(chunk), out);
    return;
  }
  if (!hf.metaspace) {
    if (!s.empty()) bpe_word(s, out);
    return;
  }
  const std::string& rep = hf.metaspace_replacement;
  replace_all(&s, " ", rep);
  const bool prepend = hf.metaspace_prepend == HfBpeConfig::Prepend::always ||
                       (hf.metaspace_prepend == HfBpeConfig::Prepend::first && at_start);
  if (prepend && !s.empty() && s.compare(0, rep.size(), rep) != 0) s.insert(0, rep);
  if (!hf.metaspace_split) {
    if (!s.empty()) bpe_word(s, out);
    return;
  }
  // Split before each replacement (MergedWithNext): "▁a▁b" -> "▁a", "▁b".
  size_t start = 0;
  for (size_t pos = s.find(rep, rep.size()); pos != std::string::npos; pos = s.find(rep, pos + rep.size())) {
    if (pos > start) bpe_word(s.substr(start, pos - start), out);
    start = pos;
  }
  if (start < s.size()) bpe_word(s.substr(start), out);
}

// A character of a SentencePiece-style word that is not a token: its bytes
// as <0xNN> tokens when all exist (byte_fallback), else the unknown token,
// once for a run of them when fuse_unk.
void Tokenizer::hf_bpe_fallback(std::string_view piece, std::vector<int32_t>* out, bool* last_unk) const {
  // Pieces left unmerged are single characters; split a longer one defensively.
  for (size_t i = 0; i < piece.size();) {
    const size_t n = std::min(utf8_len(static_cast<unsigned char>(piece[i])), piece.size() - i);
    const std::string_view ch = piece.substr(i, n);
    i += n;
    auto it = token_to_id_.find(ch);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      *last_unk = false;
      continue;
    }
    if (vocab_.hf.byte_fallback) {
      std::vector<int32_t> bytes;
      for (char c : ch) {
        const int32_t id = byte_token(static_cast<uint8_t>(c));
        if (id < 0) break;
        bytes.push_back(id);
      }
      if (bytes.size() == ch.size()) {
        out->insert(out->end(), bytes.begin(), bytes.end());
        *last_unk = false;
        continue;
      }
    }
    if (vocab_.unk_id < 0) continue;  // no unknown token: the character is dropped, as tokenizers does
    if (vocab_.hf.fuse_unk && *last_unk) continue;
    out->push_back(vocab_.unk_id);
    *last_unk = true;
  }
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

  const bool sentencepiece_style = vocab_.hf.enabled && !vocab_.hf.byte_level;
  bool last_unk = false;
  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = w.substr(sym[i].offset, sym[i].n);
    auto it = token_to_id_.find(piece);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      last_unk = false;
      continue;
    }
    if (sentencepiece_style) {
      hf_bpe_fallback(piece, out, &last_unk);
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
