// Hand-written scanners equivalent to the pre-tokenizer regexes of byte-level
// BPE vocabularies (GPT-2, SmolLM, Llama-3, Qwen2, Qwen3.5, Mistral's tekken). They split text into the
// chunks that BPE merges never cross.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenizer/vocab.hpp"

namespace troupe::tokenizer {

/// Split `text` (UTF-8) into pre-token chunks as llama.cpp b11434's
/// unicode_regex_split does (tekken: as the original regex, see split_tekken): concatenating them gives `text` back when it is
/// valid UTF-8; an invalid byte becomes U+FFFD (llama.cpp's replacement) and a
/// code point beyond U+10FFFF (lead bytes F5..F7, which llama.cpp rejects with
/// an exception) U+FFFD too.
std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text);

/// The Split regex a Hugging Face tokenizer.json of this family carries (its
/// original form, before llama.cpp's adaptation): GPT-2's is ByteLevel's own
/// regex (use_regex true). SmolLM's is GPT-2's after a Digits split, so it has none: "".
std::string_view hf_split_regex(PreTokenizer pre);
/// The family whose Split regex is `regex` (llama.cpp's adapted forms
/// accepted too), or false.
bool pre_tokenizer_of_hf_regex(std::string_view regex, PreTokenizer* pre);

}  // namespace troupe::tokenizer
