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
//   the last ids        the control tokens of the family's style (VocabStyle), with
//                       its chat template:
//                         chatml: <|begin_of_text|> (BOS), <|end_of_text|> (EOS),
//                                 <|im_start|>, <|im_end|> (end of turn)
//                         phi3:   <unk>, <s> (BOS), </s>, <|endoftext|> (EOS), <|assistant|>,
//                                 <|system|>, <|end|> (end of turn), <|user|>: the names
//                                 llama.cpp looks up in a file whose general.name says phi3
//                         gemma:  <pad>, <eos> (EOS), <bos> (BOS), <unk>, <start_of_turn>,
//                                 <end_of_turn> (end of turn)
//                         gpt2:   <|endoftext|> (BOS, EOS and unknown), no chat template and
//                                 no BOS added to prompts, as GPT-2's converted files have
//
// Any text encodes (every byte is a token) and decodes back to the same bytes;
// English splits into tokens of about two bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "troupe/status.hpp"

namespace troupe::dummy {

/// The special tokens and chat template of a family's real vocabulary.
enum class VocabStyle { chatml, phi3, gemma, gpt2 };
/// The style of a general.architecture: phi3, gemma2/gemma3 and gpt2 have their own, the rest ChatML.
VocabStyle vocab_style_of(std::string_view arch);

struct SyntheticVocab {
  std::vector<std::string> tokens;  // GGUF text (byte-level characters)
  std::vector<int32_t> types;       // GGUF token types: 1 normal, 3 control
  std::vector<std::string> merges;  // "left right", highest priority first
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, unk_id = -1, pad_id = -1;  // -1: none
  bool add_bos = true;              // tokenizer.ggml.add_bos_token
  std::string chat_template;        // Jinja; empty: none
};

/// The vocabulary of `n_vocab` tokens; invalid_argument when n_vocab leaves no room for
/// the bytes, the style's specials and one merge, or is above 256 + 256^2 + 256^3 + specials.
Result<SyntheticVocab> make_synthetic_vocab(int64_t n_vocab, VocabStyle style = VocabStyle::chatml);
/// Writes it as tokenizer.ggml.* metadata, with its tokenizer.chat_template when it has one.
void add_tokenizer_metadata(const SyntheticVocab& vocab, gguf::GgufBuilder& builder);

}  // namespace troupe::dummy
