// The plain description of a tokenizer vocabulary, filled from GGUF metadata
// (tokenizer.ggml.*), from a Hugging Face tokenizer.json (WordPiece), or
// built by hand in tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::tokenizer {

/// GGUF token types (tokenizer.ggml.token_type), as llama.cpp's llama_token_type.
enum class TokenType : int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

/// spm: SentencePiece-style BPE ("llama" in GGUF); bpe: byte-level BPE ("gpt2");
/// wpm: WordPiece, the BERT tokenizer ("bert" in GGUF, "WordPiece" in tokenizer.json).
enum class VocabKind { spm, bpe, wpm };

/// Pre-tokenizer of a byte-level BPE vocabulary (tokenizer.ggml.pre).
enum class PreTokenizer { gpt2, smollm, llama3, qwen2, qwen35, tekken };

/// How a WordPiece vocabulary splits text into words and words into pieces.
struct WordPieceConfig {
  /// bert: Hugging Face's BertNormalizer (the four options below) then
  /// BertPreTokenizer (split on whitespace; each punctuation character is a
  /// word). llama_cpp: llama.cpp b11434's WPM preprocessing, which its test
  /// vectors follow: with strip_accents the first code point of each
  /// character's NFD and no combining marks, simple lowercase when lowercase,
  /// controls dropped, punctuation, ASCII symbols and CJK ideographs as words.
  enum class Normalizer { bert, llama_cpp };
  Normalizer normalizer = Normalizer::bert;
  bool clean_text = true;            // drop NUL, U+FFFD and controls; whitespace becomes ' '
  bool handle_chinese_chars = true;  // CJK ideographs become words of their own
  bool strip_accents = true;         // NFD, then drop non-spacing marks (tokenizer.json null: as lowercase)
  bool lowercase = true;
  /// The first piece of a word is looked up as word_prefix + text, the next
  /// ones as continuing_prefix + text: tokenizer.json "" and "##"; llama.cpp's
  /// GGUF conversion "▁" (U+2581) and "" (it rewrites "x" to "▁x" and "##x" to "x").
  std::string word_prefix;
  std::string continuing_prefix = "##";
  int max_input_chars_per_word = 100;  // a longer word becomes [UNK]; 0: no limit (llama.cpp)
  bool decode_cleanup = true;          // decode() removes the spaces before . , ! ? and in n't 's 're ...
};

/// A BPE vocabulary read from a Hugging Face tokenizer.json: how its text is
/// prepared and decoded (GGUF vocabularies leave `enabled` false). Byte-level
/// files (Llama 3, Qwen2) split with `Vocab::pre` and map bytes as GGUF "gpt2";
/// SentencePiece-style files (Llama 2, Gemma) work on the text with spaces
/// as U+2581 and fall back to <0xNN> byte tokens.
struct HfBpeConfig {
  bool enabled = false;
  bool byte_level = true;
  /// Normalizer steps, in order: NFC, Replace (a string by a string), Prepend
  /// (text before a non-empty segment).
  struct Step {
    enum class Kind { nfc, replace, prepend } kind;
    std::string from, to;
  };
  std::vector<Step> normalizer;
  bool split = true;              // byte-level: split with `Vocab::pre` (false: one chunk per segment)
  bool byte_level_prefix_space = false;  // ByteLevel add_prefix_space: ' ' before a segment without one
  // Metaspace pre-tokenizer: ' ' -> replacement; the replacement before a segment
  // that lacks one (always, or only at the start of the text); split before each.
  bool metaspace = false;
  std::string metaspace_replacement;
  enum class Prepend { never, always, first } metaspace_prepend = Prepend::never;
  bool metaspace_split = false;
  bool byte_fallback = false;     // a character not in the vocab: its bytes as <0xNN> tokens
  bool fuse_unk = false;          // consecutive unknown characters: one unknown token
  std::string decode_space;       // decoder: this text (U+2581) becomes ' '
  bool decode_strip_space = false;  // decoder Strip: one leading ' ' of the text dropped
  bool decode_first_token_spaces = false;  // decoder Metaspace: the first token's spaces dropped
  /// Added tokens with lstrip / rstrip: whitespace before / after them is part of the match.
  std::vector<int32_t> lstrip_ids, rstrip_ids;
};

struct Vocab {
  VocabKind kind = VocabKind::spm;
  PreTokenizer pre = PreTokenizer::gpt2;
  std::vector<std::string> tokens;
  std::vector<float> scores;        // empty or one per token (SPM merge priority)
  std::vector<TokenType> types;     // empty (all normal) or one per token
  std::vector<std::string> merges;  // BPE: "left right", highest priority first
  /// tokenizer.json merges as pairs (their sides may hold spaces), ranked after `merges`.
  std::vector<std::pair<std::string, std::string>> merge_pairs;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t sep_id = -1;   // WordPiece: [SEP], appended by encode(add_special) when add_sep
  int32_t cls_id = -1;   // WordPiece: [CLS] (also bos_id, which encode(add_special) prepends)
  int32_t mask_id = -1;  // WordPiece: [MASK]
  // Fill-in-the-middle tokens (tokenizer.ggml.fim_*_token_id); found by their
  // text when absent, as llama.cpp does. pad, rep and sep end generation.
  int32_t fim_pre_id = -1, fim_suf_id = -1, fim_mid_id = -1;
  int32_t fim_pad_id = -1, fim_rep_id = -1, fim_sep_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_sep = false;
  bool add_space_prefix = false;  // SPM dummy prefix
  bool ignore_merges = false;     // BPE: a whole pre-token found in the vocab wins (llama3)
  WordPieceConfig wpm;            // WordPiece only
  HfBpeConfig hf;                 // BPE from tokenizer.json only
};

/// Parse a tokenizer.ggml.pre value; not_supported names the known ones.
Result<PreTokenizer> parse_pre_tokenizer(const std::string& pre);

}  // namespace troupe::tokenizer
