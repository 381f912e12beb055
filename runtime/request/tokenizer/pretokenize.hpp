// Hand-written scanners equivalent to the pre-tokenizer regexes of byte-level
// BPE vocabularies (GPT-2, SmolLM, Llama-3, Qwen2). They split text into the
// chunks that BPE merges never cross.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/request/tokenizer/vocab.hpp"

namespace troupe::tokenizer {

/// Split `text` (UTF-8) into pre-token chunks; concatenating them gives `text` back.
std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text);

}  // namespace troupe::tokenizer
