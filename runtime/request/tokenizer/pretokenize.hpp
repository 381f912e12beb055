// Hand-written scanners equivalent to the pre-tokenizer regexes of byte-level
// BPE vocabularies (GPT-2, SmolLM, Llama-3, Qwen2, Qwen3.5). They split text into the
// chunks that BPE merges never cross.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/request/tokenizer/vocab.hpp"

namespace troupe::tokenizer {

/// Split `text` (UTF-8) into pre-token chunks as llama.cpp b11434's
/// unicode_regex_split does: concatenating them gives `text` back when it is
/// valid UTF-8; an invalid byte becomes U+FFFD (llama.cpp's replacement) and a
/// code point beyond U+10FFFF (lead bytes F5..F7, which llama.cpp rejects with
/// an exception) U+FFFD too.
std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text);

}  // namespace troupe::tokenizer
