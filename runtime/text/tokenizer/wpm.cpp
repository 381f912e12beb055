// WordPiece text splitting and the WordPiece model: Hugging Face tokenizers'
// BertNormalizer + BertPreTokenizer + WordPiece, and llama.cpp's WPM.
#include "runtime/text/tokenizer/wpm.hpp"

#include <algorithm>

#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/unicode.hpp"
#include "runtime/text/tokenizer/unicode_bert.hpp"

namespace troupe::tokenizer {

namespace {

/// BertNormalizer's whitespace: \t \n \r and White_Space.
bool bert_is_whitespace(uint32_t cp) { return cp == '\t' || cp == '\n' || cp == '\r' || is_whitespace(cp); }

/// BertNormalizer's control: Cc, Cf, Co, Cs (of Unicode 8.0) but \t \n \r.
bool bert_is_control(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return (category_flags(cp) & kBertControl) != 0;
}

/// BertPreTokenizer's punctuation: ASCII punctuation (symbols included) or P* (of Unicode 8.0).
bool bert_is_punctuation(uint32_t cp) {
  const bool ascii_punct = (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
                           (cp >= 0x7B && cp <= 0x7E);
  return ascii_punct || (category_flags(cp) & kBertPunctuation) != 0;
}

bool bert_is_mark_nonspacing(uint32_t cp) { return (category_flags(cp) & kBertMarkNonspacing) != 0; }

/// Collects words of code points as UTF-8.
class WordSink {
 public:
  void add(uint32_t cp) { append_utf8(cp, &current_); }
  void end_word() {
    if (!current_.empty()) words_.push_back(std::move(current_));
    current_.clear();
  }
  void single(uint32_t cp) {
    end_word();
    add(cp);
    end_word();
  }
  std::vector<std::string> finish() {
    end_word();
    return std::move(words_);
  }

 private:
  std::string current_;
  std::vector<std::string> words_;
};

}  // namespace

std::vector<std::string> bert_words(std::string_view text, const WordPieceConfig& c) {
  const std::vector<uint32_t> input = utf8_to_codepoints_lossy(text);
  // The normalizer, one code point at a time (each step maps a code point to
  // zero or more, in the order of BertNormalizer::normalize).
  std::vector<uint32_t> norm;
  norm.reserve(input.size() + 8);
  std::vector<uint32_t> decomposed, lowered;
  for (uint32_t cp : input) {
    if (c.clean_text) {
      if (cp == 0 || cp == 0xFFFD || bert_is_control(cp)) continue;
      if (bert_is_whitespace(cp)) cp = ' ';
    }
    const bool cjk = c.handle_chinese_chars && is_cjk_ideograph(cp);
    if (cjk) norm.push_back(' ');
    decomposed.clear();
    if (c.strip_accents) {
      append_nfd(cp, &decomposed);
      decomposed.erase(std::remove_if(decomposed.begin(), decomposed.end(), bert_is_mark_nonspacing),
                       decomposed.end());
    } else {
      decomposed.push_back(cp);
    }
    for (uint32_t d : decomposed) {
      if (c.lowercase) {
        lowered.clear();
        append_lower(d, &lowered);
        norm.insert(norm.end(), lowered.begin(), lowered.end());
      } else {
        norm.push_back(d);
      }
    }
    if (cjk) norm.push_back(' ');
  }
  // The pre-tokenizer: whitespace separates words and is dropped; punctuation is isolated.
  WordSink words;
  for (uint32_t cp : norm) {
    if (is_whitespace(cp)) {
      words.end_word();
    } else if (bert_is_punctuation(cp)) {
      words.single(cp);
    } else {
      words.add(cp);
    }
  }
  return words.finish();
}

std::vector<std::string> llama_cpp_wpm_words(std::string_view text, bool lowercase, bool strip_accents) {
  WordSink words;
  for (uint32_t cp : utf8_to_codepoints_replacing(text)) {
    if (strip_accents) cp = nfd_first(cp);
    if (is_whitespace(cp)) {
      words.end_word();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || (category_flags(cp) & kControl) != 0) continue;
    if (strip_accents && (codepoint_flags(cp) & kMark) != 0) continue;  // every \p{M}, as llama.cpp
    const uint32_t out = lowercase ? to_lower_simple(cp) : cp;
    if (is_punctuation(cp) || (cp < 0x7F && is_symbol(cp)) || is_cjk_ideograph(cp)) {
      words.single(out);
    } else {
      words.add(out);
    }
  }
  return words.finish();
}

std::vector<std::string> wordpiece_words(std::string_view text, const WordPieceConfig& config) {
  return config.normalizer == WordPieceConfig::Normalizer::llama_cpp
             ? llama_cpp_wpm_words(text, config.lowercase, config.strip_accents)
             : bert_words(text, config);
}

void Tokenizer::encode_wpm(std::string_view text, std::vector<int32_t>* out) const {
  const WordPieceConfig& c = vocab_.wpm;
  std::string candidate;
  for (const std::string& word : wordpiece_words(text, c)) {
    const size_t first = out->size();
    if (c.max_input_chars_per_word > 0 &&
        utf8_to_codepoints_lossy(word).size() > static_cast<size_t>(c.max_input_chars_per_word)) {
      out->push_back(vocab_.unk_id);
      continue;
    }
    // Greedy longest match from the left; a position where nothing matches makes the whole word [UNK].
    bool bad = false;
    for (size_t start = 0; start < word.size();) {
      const std::string& prefix = start == 0 ? c.word_prefix : c.continuing_prefix;
      // No vocabulary entry is longer than max_piece_bytes_: do not try longer candidates.
      size_t end = word.size();
      if (max_piece_bytes_ > prefix.size()) end = std::min(end, start + (max_piece_bytes_ - prefix.size()));
      while (end > start && end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
      int32_t found = -1;
      while (end > start) {
        candidate.assign(prefix);
        candidate.append(word, start, end - start);
        auto it = token_to_id_.find(candidate);
        if (it != token_to_id_.end()) {
          found = it->second;
          break;
        }
        --end;  // back one code point
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
      }
      if (found < 0) {
        bad = true;
        break;
      }
      out->push_back(found);
      start = end;
    }
    if (bad) {
      out->resize(first);
      out->push_back(vocab_.unk_id);
    }
  }
}

}  // namespace troupe::tokenizer
