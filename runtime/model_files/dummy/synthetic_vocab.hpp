// The tokenizer of a dummy model: a synthetic byte-level BPE vocabulary
// (GGUF "gpt2" with the "gpt-2" pre-tokenizer, which troupe and llama.cpp
// both read) of exactly the shape's vocabulary size.
//
//   ids 0..255          the 256 bytes (id == byte value), GPT-2's visible characters
//   ids 256..V-5        merges, most common first: every pair of two bytes, then
//                       (pair, byte) triples; bytes are ranked in an English-like
//                       frequency order (" etaoins...", capitals, digits,
//                       punctuation, then the rest), and a merge of bytes ranked
//                       below k comes before any merge that uses the byte ranked k
//   ids V-4..V-1        control tokens <|begin_of_text|> (BOS), <|end_of_text|>
//                       (EOS), <|im_start|>, <|im_end|> (end of turn); a ChatML template
//
// Any text encodes (every byte is a token) and decodes back to the same bytes;
// English splits into tokens of about two bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "troupe/status.hpp"

namespace troupe::dummy {

struct SyntheticVocab {
  std::vector<std::string> tokens;  // GGUF text (byte-level characters)
  std::vector<int32_t> types;       // GGUF token types: 1 normal, 3 control
  std::vector<std::string> merges;  // "left right", highest priority first
  int32_t bos_id = -1, eos_id = -1, im_start_id = -1, im_end_id = -1;
};

/// The vocabulary of `n_vocab` tokens; invalid_argument when n_vocab is below
/// 261 (bytes, specials, one merge) or above 256 + 256^2 + 256^3.
Result<SyntheticVocab> make_synthetic_vocab(int64_t n_vocab);
/// Writes it as tokenizer.ggml.* metadata, with a ChatML tokenizer.chat_template.
void add_tokenizer_metadata(const SyntheticVocab& vocab, gguf::GgufBuilder& builder);

}  // namespace troupe::dummy
