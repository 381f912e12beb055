// Text <-> token ids for GGUF vocabularies, with llama.cpp's semantics:
// SentencePiece-style BPE ("llama" in GGUF), byte-level BPE ("gpt2") with
// the GPT-2, SmolLM, Llama-3 and Qwen2 pre-tokenizers, and WordPiece ("bert").
// WordPiece and BPE also load from a Hugging Face tokenizer.json with that
// library's semantics (tokenizer_json.cpp, tokenizer_json_bpe.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/text/tokenizer/vocab.hpp"
#include "troupe/status.hpp"

namespace troupe::tokenizer {

// Hash for string-keyed maps that are probed with string_views (no allocation per lookup).
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringViewHash, std::equal_to<>>;

class Tokenizer {
 public:
  /// A Hugging Face tokenizer.json. BPE models (byte-level and SentencePiece-
  /// style with byte fallback) read tokenizer_config.json beside the file when
  /// there is one; see tokenizer_json_bpe.cpp for what is supported.
  /// With a WordPiece model (BERT and its
  /// descendants): normalizer BertNormalizer (or null), pre_tokenizer
  /// BertPreTokenizer, post_processor TemplateProcessing "[CLS] $A [SEP]" /
  /// BertProcessing (or null: no special tokens), decoder WordPiece (or null).
  /// Added tokens marked special become control tokens. "truncation" and
  /// "padding" are ignored: callers cut to the model's limit themselves.
  /// Errors name the file: not_found, data_loss (bad JSON, missing or mistyped
  /// fields, holes in the ids), not_supported (another model or component type).
  static Result<std::unique_ptr<Tokenizer>> from_tokenizer_json(const std::string& path);
  /// Validates the vocab (sizes, special ids, merges) and builds the lookup tables.
  static Result<std::unique_ptr<Tokenizer>> from_vocab(Vocab vocab);

  /// add_special: BOS (and EOS where the vocab says add_eos) as llama_tokenize(add_special);
  /// WordPiece: [CLS] ... [SEP] (its template's tokens).
  /// parse_special: text of control tokens (e.g. "<|im_start|>") maps to their ids;
  /// user-defined tokens are always matched, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  /// Bytes of one token (SPM: '▁' -> ' ', <0xNN> -> the byte; BPE: byte-level decoded;
  /// WordPiece: a word-initial piece gets a leading ' ', "##" is dropped from a continuation).
  /// Control/unknown tokens give their text when `special`, "" otherwise. Out-of-range ids give "".
  std::string token_to_piece(int32_t id, bool special = true) const;
  /// Concatenation of the pieces (no space stripping); special tokens dropped when skip_special.
  /// WordPiece: as Hugging Face decodes: pieces joined with spaces, "##" continuations glued,
  /// the leading space dropped and, when the vocab says decode_cleanup, " ." " ," " n't"... cleaned up.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const;

  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  bool add_bos() const { return vocab_.add_bos; }
  int32_t unk_id() const { return vocab_.unk_id; }
  int32_t pad_id() const { return vocab_.pad_id; }
  int32_t cls_id() const { return vocab_.cls_id; }  // WordPiece
  int32_t sep_id() const { return vocab_.sep_id; }  // WordPiece
  /// End of generation: eos, eot, eom and tokens such as <|im_end|>, <|eot_id|>, <end_of_turn>.
  bool is_eog(int32_t id) const;
  std::vector<int32_t> eog_ids() const { return eog_ids_; }
  /// Control tokens (and unknown): hidden by decode(skip_special=true).
  bool is_special(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view text) const;
  /// Raw vocabulary text of a token ("" when out of range).
  const std::string& token_text(int32_t id) const;
  /// "spm", "bpe" or "wpm".
  std::string model_type() const;
  const Vocab& vocab() const { return vocab_; }

 private:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  Status init();
  TokenType type_of(int32_t id) const;
  void encode_text(std::string_view text, bool space_prefix, bool at_start, std::vector<int32_t>* out) const;
  void encode_hf_bpe(std::string_view text, bool at_start, std::vector<int32_t>* out) const;
  void hf_bpe_fallback(std::string_view piece, std::vector<int32_t>* out, bool* last_unk) const;
  void encode_spm(std::string_view text, std::vector<int32_t>* out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>* out) const;
  void encode_wpm(std::string_view text, std::vector<int32_t>* out) const;
  std::string decode_wpm(const std::vector<int32_t>& ids, bool skip_special) const;
  void bpe_word(const std::string& word, std::vector<int32_t>* out) const;
  int32_t byte_token(uint8_t byte) const;
  int find_merge_rank(std::string_view left, std::string_view right) const;

  Vocab vocab_;
  StringMap<int32_t> token_to_id_;
  StringMap<int> merge_rank_;                         // "left right" -> rank
  std::vector<int32_t> special_tokens_;               // matched in raw text, longest first
  std::vector<int32_t> eog_ids_;
  std::vector<int32_t> byte_tokens_;                  // SPM <0xNN> ids, -1 when absent
  size_t max_piece_bytes_ = 0;                        // WordPiece: longest token text
};

}  // namespace troupe::tokenizer
