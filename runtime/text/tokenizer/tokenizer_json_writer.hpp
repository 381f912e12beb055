// A Vocab (as loaded from a GGUF, make-gguf's synthetic vocabularies
// included) written as the Hugging Face files a model folder carries:
// tokenizer.json and tokenizer_config.json, in the layout real models of
// that family use:
//
//   byte-level BPE ("gpt2" in GGUF): model BPE (ignore_merges as the vocab),
//     pre_tokenizer Sequence[Split(the family's regex, Isolated), ByteLevel
//     (use_regex false)] for Llama 3 / Qwen2 / Qwen3.5, ByteLevel (use_regex
//     true) for GPT-2, Sequence[Digits(individual), ByteLevel] for SmolLM;
//     decoder ByteLevel; post_processor ByteLevel, in a Sequence with a
//     TemplateProcessing when BOS/EOS are added (Llama 3).
//   SentencePiece-style BPE ("llama" in GGUF, Llama 2 / Gemma): model BPE
//     with byte_fallback and fuse_unk, merges derived from the scores as
//     Hugging Face's SentencePiece converter derives them; normalizer
//     Replace(' ' -> '▁'), with Prepend('▁') first when the vocab adds the
//     dummy prefix; decoder Replace('▁' -> ' '), ByteFallback, Fuse (and
//     Strip of one leading space with the prefix); TemplateProcessing with
//     BOS/EOS as the vocab adds them.
//
// No normalizer is written for byte-level files, not even Qwen2's NFC: the
// GGUF tokenizer (as llama.cpp) does not normalize, and the folder must
// tokenize as the GGUF it was written from.
//
// Control, unknown and user-defined tokens (after the engine's retyping of
// </s>, <|im_end|>, ... by their text) become added_tokens (special for
// control/unknown), matched in raw text (normalized false) as llama.cpp
// matches them. Tokenizer::from_tokenizer_json reads the result back into a
// tokenizer that encodes as the GGUF-built one.
#pragma once

#include <string>

#include "runtime/text/tokenizer/vocab.hpp"
#include "troupe/status.hpp"

namespace troupe::tokenizer {

struct HfTokenizerFiles {
  std::string tokenizer_json;         // tokenizer.json text
  std::string tokenizer_config_json;  // tokenizer_config.json text
};

/// The two files for `vocab`; chat_template (may be empty: none) goes into
/// tokenizer_config.json. invalid_argument for a WordPiece vocab (not written
/// here), a token text that is not valid UTF-8, or a BPE merge that is malformed.
Result<HfTokenizerFiles> write_hf_tokenizer(const Vocab& vocab, const std::string& chat_template);

/// Writes tokenizer.json and tokenizer_config.json into directory `dir` (which must exist).
Status write_hf_tokenizer_files(const HfTokenizerFiles& files, const std::string& dir);

}  // namespace troupe::tokenizer
