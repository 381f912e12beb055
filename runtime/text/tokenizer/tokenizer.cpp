#include "runtime/text/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <bitset>
#include <cstdio>

#include "runtime/text/tokenizer/unicode.hpp"
#include "troupe/log.hpp"

namespace troupe::tokenizer {

namespace {

// llama.cpp b11434's lists of texts (llama_vocab::impl::load): tokens that end
// generation, and fill-in-the-middle tokens found by their text when the GGUF
// names none. Every token found this way becomes a control token.
const char* const kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "</s>", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~["};
// The first of these that exists becomes the EOT token when the GGUF names none.
const char* const kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
    "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
const std::vector<const char*> kFimPreTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
const std::vector<const char*> kFimSufTexts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
const std::vector<const char*> kFimMidTexts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
const std::vector<const char*> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const std::vector<const char*> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
const std::vector<const char*> kFimSepTexts = {"<|file_sep|>"};

// The byte of a byte token "<0xNN>" (empty when the text is not of that form).
std::string byte_token_piece(const std::string& text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
    const int hi = hex(text[3]), lo = hex(text[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  return {};
}

// Byte lengths of the whitespace (Unicode White_Space) at the end / start of `s`.
size_t trim_trailing_whitespace(std::string_view s) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  utf8_decode_with_offsets(s, &cps, &offsets);
  size_t keep = cps.size();
  while (keep > 0 && is_whitespace(cps[keep - 1])) --keep;
  return keep == cps.size() ? s.size() : offsets[keep];
}

size_t leading_whitespace(std::string_view s) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  utf8_decode_with_offsets(s, &cps, &offsets);
  size_t k = 0;
  while (k < cps.size() && is_whitespace(cps[k])) ++k;
  return k == cps.size() ? s.size() : offsets[k];
}

bool is_control_like(TokenType t) {
  return t == TokenType::control || t == TokenType::unknown;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_vocab(Vocab vocab) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab)));
  Status st = tok->init();
  if (!st.ok()) return st;
  return tok;
}

Status Tokenizer::init() {
  const size_t n = vocab_.tokens.size();
  if (n == 0) return invalid_argument("tokenizer vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return invalid_argument("tokenizer vocabulary is too large");
  if (!vocab_.scores.empty() && vocab_.scores.size() != n)
    return data_loss(fmt::format("tokenizer scores: {} entries for {} tokens", vocab_.scores.size(), n));
  if (!vocab_.types.empty() && vocab_.types.size() != n)
    return data_loss(fmt::format("tokenizer token types: {} entries for {} tokens", vocab_.types.size(), n));
  if (vocab_.types.empty()) vocab_.types.assign(n, TokenType::normal);
  if (vocab_.scores.empty()) vocab_.scores.assign(n, 0.0f);

  // Out-of-range special ids are dropped (llama.cpp warns and keeps its default).
  for (int32_t* id : {&vocab_.bos_id, &vocab_.eos_id, &vocab_.eot_id, &vocab_.eom_id, &vocab_.unk_id,
                      &vocab_.pad_id, &vocab_.sep_id, &vocab_.cls_id, &vocab_.mask_id, &vocab_.fim_pre_id,
                      &vocab_.fim_suf_id, &vocab_.fim_mid_id, &vocab_.fim_pad_id, &vocab_.fim_rep_id,
                      &vocab_.fim_sep_id}) {
    if (*id < -1 || *id >= static_cast<int32_t>(n)) {
      TROUPE_LOG_WARNING("tokenizer: special token id {} is out of range (vocab size {}); ignored", *id, n);
      *id = -1;
    }
  }
  if (vocab_.add_bos && vocab_.bos_id < 0) vocab_.add_bos = false;
  if (vocab_.add_eos && vocab_.eos_id < 0) vocab_.add_eos = false;
  if (vocab_.add_sep && vocab_.sep_id < 0) vocab_.add_sep = false;
  if (vocab_.kind == VocabKind::wpm && vocab_.unk_id < 0) {
    return data_loss("WordPiece tokenizer: the vocabulary has no unknown token ([UNK]), which WordPiece needs");
  }

  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string text = vocab_.tokens[i];
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp: keep ids unique
    vocab_.tokens[i] = text;
    token_to_id_[text] = static_cast<int32_t>(i);  // last duplicate wins, as llama.cpp's map
  }

  if (vocab_.kind == VocabKind::wpm) {
    for (const std::string& t : vocab_.tokens) max_piece_bytes_ = std::max(max_piece_bytes_, t.size());
  } else if (vocab_.kind == VocabKind::bpe) {
    // Keyed "left\0right": sides may hold spaces (tokenizer.json pairs).
    merge_rank_.reserve(vocab_.merges.size() + vocab_.merge_pairs.size());
    for (size_t r = 0; r < vocab_.merges.size(); ++r) {
      const std::string& m = vocab_.merges[r];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size())
        return data_loss(fmt::format("tokenizer merge {} is malformed: '{}'", r, m));
      std::string key = m;
      key[sp] = '\0';
      merge_rank_.emplace(std::move(key), static_cast<int>(r));  // first (best) rank wins
    }
    for (size_t r = 0; r < vocab_.merge_pairs.size(); ++r) {
      const auto& [left, right] = vocab_.merge_pairs[r];
      if (left.empty() || right.empty()) return data_loss(fmt::format("tokenizer merge {} has an empty side", r));
      std::string key = left;
      key.push_back('\0');
      key += right;
      merge_rank_.emplace(std::move(key), static_cast<int>(vocab_.merges.size() + r));
    }
  }
  if (vocab_.kind == VocabKind::bpe && vocab_.hf.enabled && !vocab_.hf.byte_level) {
    byte_tokens_.assign(256, -1);  // tokenizer.json byte_fallback: <0xNN> only
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      if (auto it = token_to_id_.find(buf); it != token_to_id_.end()) byte_tokens_[b] = it->second;
    }
  } else if (vocab_.kind == VocabKind::spm) {
    byte_tokens_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      auto it = token_to_id_.find(buf);
      if (it != token_to_id_.end()) {
        byte_tokens_[b] = it->second;
      } else {
        const std::string one(1, static_cast<char>(b));
        auto it2 = token_to_id_.find(one);
        if (it2 != token_to_id_.end()) byte_tokens_[b] = it2->second;
      }
    }
  }

  // llama.cpp retypes tokens it finds by text; a tokenizer.json's types stand
  // as the file gives them (Hugging Face matches only its added tokens).
  auto set_type = [this](int32_t id, TokenType t) {
    if (!vocab_.hf.enabled) vocab_.types[id] = t;
  };
  // End-of-generation and fill-in-the-middle tokens by their text, as llama.cpp.
  auto find_text = [this](const char* text) -> int32_t {
    auto it = token_to_id_.find(std::string_view(text));
    return it == token_to_id_.end() ? -1 : it->second;
  };
  if (vocab_.eot_id < 0) {
    for (const char* text : kEotTexts) {
      if ((vocab_.eot_id = find_text(text)) >= 0) break;
    }
  }
  if (vocab_.eom_id < 0) vocab_.eom_id = find_text("<|eom_id|>");
  for (auto [id, texts] : {std::pair{&vocab_.fim_pre_id, &kFimPreTexts}, {&vocab_.fim_suf_id, &kFimSufTexts},
                           {&vocab_.fim_mid_id, &kFimMidTexts}, {&vocab_.fim_pad_id, &kFimPadTexts},
                           {&vocab_.fim_rep_id, &kFimRepTexts}, {&vocab_.fim_sep_id, &kFimSepTexts}}) {
    if (*id >= 0) continue;
    for (const char* text : *texts) {
      if ((*id = find_text(text)) >= 0) break;
    }
  }
  for (int32_t id : {vocab_.eot_id, vocab_.eom_id, vocab_.fim_pre_id, vocab_.fim_suf_id, vocab_.fim_mid_id,
                     vocab_.fim_pad_id, vocab_.fim_rep_id, vocab_.fim_sep_id}) {
    if (id >= 0) set_type(id, TokenType::control);  // llama.cpp overrides these to control
  }
  auto add_eog = [this](int32_t id) {
    if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end()) eog_ids_.push_back(id);
  };
  for (int32_t id : {vocab_.fim_pad_id, vocab_.fim_rep_id, vocab_.fim_sep_id}) add_eog(id);
  for (const char* text : kEogTexts) {
    const int32_t id = find_text(text);
    if (id < 0) continue;
    set_type(id, TokenType::control);
    add_eog(id);
  }
  // gpt-oss: these are always rendered (user-defined), as llama.cpp's "quick hack".
  for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (const int32_t id = find_text(text); id >= 0) set_type(id, TokenType::user_defined);
  }
  add_eog(vocab_.eos_id);
  add_eog(vocab_.eot_id);
  add_eog(vocab_.eom_id);
  auto is_eog_text = [&](const char* text) {
    const int32_t id = find_text(text);
    return id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
  };
  auto drop_eog = [&](const char* text, TokenType now) {
    const int32_t id = find_text(text);
    eog_ids_.erase(std::remove(eog_ids_.begin(), eog_ids_.end(), id), eog_ids_.end());
    set_type(id, now);
  };
  // o200k_harmony and solar-open: <|end|> ends a message, not the generation.
  if (is_eog_text("<|end|>") && ((is_eog_text("<|return|>") && is_eog_text("<|call|>")) ||
                                 (is_eog_text("<|calls|>") && is_eog_text("<|flush|>")))) {
    drop_eog("<|end|>", TokenType::user_defined);
  }
  // Gemma 4 and PLaMo have an ordinary </s>.
  if (is_eog_text("</s>") && (is_eog_text("<|tool_response>") || is_eog_text("<|plamo:eos|>"))) {
    drop_eog("</s>", TokenType::normal);
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());

  for (size_t i = 0; i < n; ++i) {
    const TokenType t = vocab_.types[i];
    if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown)
      special_tokens_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [this](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });
  return {};
}

TokenType Tokenizer::type_of(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::undefined;
  return vocab_.types[id];
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

bool Tokenizer::is_special(int32_t id) const { return is_control_like(type_of(id)); }

std::string Tokenizer::model_type() const {
  switch (vocab_.kind) {
    case VocabKind::spm: return "spm";
    case VocabKind::bpe: return "bpe";
    case VocabKind::wpm: return "wpm";
  }
  return "?";
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  auto it = token_to_id_.find(text);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string empty;
  if (id < 0 || id >= vocab_size()) return empty;
  return vocab_.tokens[id];
}

int32_t Tokenizer::byte_token(uint8_t byte) const {
  return byte_tokens_.empty() ? -1 : byte_tokens_[byte];
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  // Fragments: raw text ranges and already-resolved special tokens, in order.
  struct Fragment {
    int32_t token;  // -1 for raw text
    size_t offset, length;
  };
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  // A token can only match where its first two bytes stand side by side in the
  // text: the text's byte pairs rule out most of a large vocabulary's special
  // tokens (Gemma's 6000 <unusedN>) before any search.
  std::bitset<256> bytes;
  std::bitset<65536> pairs;
  for (size_t i = 0; i < text.size(); ++i) {
    bytes.set(static_cast<uint8_t>(text[i]));
    if (i + 1 < text.size()) pairs.set(static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1]));
  }
  for (int32_t id : special_tokens_) {
    const TokenType t = vocab_.types[id];
    if (!parse_special && is_control_like(t)) continue;
    const std::string& tt = vocab_.tokens[id];
    const bool may_match = tt.size() == 1 ? bytes.test(static_cast<uint8_t>(tt[0]))
                                          : pairs.test(static_cast<uint8_t>(tt[0]) << 8 | static_cast<uint8_t>(tt[1]));
    if (!may_match || text.find(tt) == std::string_view::npos) continue;  // then in no fragment either
    std::vector<Fragment> next;
    next.reserve(frags.size());
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.offset, f.length);
      const bool lstrip = std::binary_search(vocab_.hf.lstrip_ids.begin(), vocab_.hf.lstrip_ids.end(), id);
      const bool rstrip = std::binary_search(vocab_.hf.rstrip_ids.begin(), vocab_.hf.rstrip_ids.end(), id);
      size_t pos = 0;
      while (true) {
        const size_t hit = raw.find(tt, pos);
        if (hit == std::string_view::npos) break;
        // Hugging Face's lstrip/rstrip: the whitespace beside the token goes with it.
        const size_t before = lstrip ? pos + trim_trailing_whitespace(raw.substr(pos, hit - pos)) : hit;
        if (before > pos) next.push_back({-1, f.offset + pos, before - pos});
        next.push_back({id, 0, 0});
        pos = hit + tt.size();
        if (rstrip) pos += leading_whitespace(raw.substr(pos));
      }
      if (pos < raw.size()) next.push_back({-1, f.offset + pos, raw.size() - pos});
    }
    frags.swap(next);
  }

  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  bool prev_special = true;  // SPM: a dummy space prefix at the start and after special tokens
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
    } else {
      encode_text(text.substr(f.offset, f.length), prev_special, f.offset == 0, &out);
      prev_special = false;
    }
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  if (add_special && vocab_.add_sep) out.push_back(vocab_.sep_id);
  return out;
}

void Tokenizer::encode_text(std::string_view text, bool space_prefix, bool at_start,
                            std::vector<int32_t>* out) const {
  if (vocab_.hf.enabled && vocab_.kind == VocabKind::bpe) {
    encode_hf_bpe(text, at_start, out);
  } else if (vocab_.kind == VocabKind::spm) {
    // SentencePiece: optional dummy prefix, then spaces become U+2581.
    std::string escaped;
    escaped.reserve(text.size() * 2 + 3);
    if (vocab_.add_space_prefix && space_prefix) escaped += "\xE2\x96\x81";
    for (char c : text) {
      if (c == ' ') {
        escaped += "\xE2\x96\x81";
      } else {
        escaped.push_back(c);
      }
    }
    encode_spm(escaped, out);
  } else if (vocab_.kind == VocabKind::wpm) {
    encode_wpm(text, out);
  } else {
    encode_bpe(text, out);
  }
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const TokenType t = type_of(id);
  if (t == TokenType::undefined && (id < 0 || id >= vocab_size())) return {};
  if (is_control_like(t)) return special ? vocab_.tokens[id] : std::string();
  const std::string& text = vocab_.tokens[id];
  if (t == TokenType::user_defined) return text;
  if (vocab_.kind == VocabKind::wpm) {
    const WordPieceConfig& c = vocab_.wpm;
    const std::string_view v = text;
    if (!c.continuing_prefix.empty() && v.substr(0, c.continuing_prefix.size()) == c.continuing_prefix)
      return text.substr(c.continuing_prefix.size());
    // A word-initial piece: tokenizer.json's "x", GGUF's "▁x". Otherwise a GGUF continuation.
    const bool word_start = c.word_prefix.empty() || v.substr(0, c.word_prefix.size()) == c.word_prefix;
    if (!word_start) return text;
    std::string piece = " ";
    piece += v.substr(c.word_prefix.size());
    return piece;
  }
  if (vocab_.kind == VocabKind::spm) {
    if (t == TokenType::normal) {
      std::string r;
      r.reserve(text.size());
      for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
          r.push_back(' ');
          i += 2;
        } else {
          r.push_back(text[i]);
        }
      }
      return r;
    }
    if (t == TokenType::byte) return byte_token_piece(text);
    return {};  // unused / undefined: suppressed like llama.cpp
  }
  if (t == TokenType::byte) return byte_token_piece(text);  // as llama.cpp (Gemma 4 style byte fallback)
  if (t != TokenType::normal) return {};
  if (!vocab_.hf.enabled || vocab_.hf.byte_level) return bpe_text_to_bytes(text);
  // SentencePiece-style tokenizer.json: the decoder's Replace of U+2581 by ' '.
  const std::string& space = vocab_.hf.decode_space;
  if (space.empty()) return text;
  std::string r;
  r.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, space.size(), space) == 0) {
      r.push_back(' ');
      i += space.size();
    } else {
      r.push_back(text[i++]);
    }
  }
  return r;
  return {};
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  if (vocab_.kind == VocabKind::wpm) return decode_wpm(ids, skip_special);
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (first && vocab_.hf.decode_first_token_spaces && id >= 0 && id < vocab_size() &&
        !(skip_special && is_control_like(type_of(id)))) {
      // Metaspace decoder: the first token's replacement characters are dropped, not made spaces.
      std::string piece = token_to_piece(id, !skip_special);
      piece.erase(std::remove(piece.begin(), piece.end(), ' '), piece.end());
      out += piece;
      first = false;
      continue;
    }
    if (id >= 0 && id < vocab_size() && !(skip_special && is_control_like(type_of(id)))) first = false;
    out += token_to_piece(id, !skip_special);
  }
  if (vocab_.hf.decode_strip_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

std::string Tokenizer::decode_wpm(const std::vector<int32_t>& ids, bool skip_special) const {
  // As the Hugging Face WordPiece decoder: every piece but the first gets a
  // space unless it continues a word, then each piece on its own is cleaned up.
  static const std::pair<std::string_view, std::string_view> kCleanup[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},     {" ,", ","},      {" ' ", "'"},     {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"},   {" 've", "'ve"},  {" 're", "'re"}};
  std::string out, piece;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (is_control_like(type_of(id))) {
      if (skip_special) continue;
      piece.assign(1, ' ');  // special tokens are words of their own
      piece += vocab_.tokens[id];
    } else {
      piece = token_to_piece(id, true);
    }
    if (out.empty() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    if (vocab_.wpm.decode_cleanup) {
      for (const auto& [from, to] : kCleanup) {
        for (size_t pos = piece.find(from); pos != std::string::npos; pos = piece.find(from, pos + to.size())) {
          piece.replace(pos, from.size(), to);
        }
      }
    }
    out += piece;
  }
  return out;
}

}  // namespace troupe::tokenizer
