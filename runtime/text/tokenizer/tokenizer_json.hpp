// Hugging Face tokenizer.json (the `tokenizers` library's format) to a Vocab,
// for WordPiece and BPE models. Tokenizer::from_tokenizer_json reads the file and uses this.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/text/tokenizer/vocab.hpp"
#include "troupe/status.hpp"

namespace troupe::tokenizer {

/// The Vocab of a parsed tokenizer.json whose model is WordPiece (or BPE:
/// vocab_from_bpe_tokenizer_json without a tokenizer_config.json); errors
/// start with `name` (the file's path) and say which field is wrong.
Result<Vocab> vocab_from_tokenizer_json(const nlohmann::json& doc, const std::string& name);

/// The Vocab of a parsed tokenizer.json whose model is BPE (byte-level or
/// SentencePiece-style with byte fallback), with the parsed
/// tokenizer_config.json beside it (nullptr: none) for BOS/EOS names and
/// add_bos_token / add_eos_token. Errors as vocab_from_tokenizer_json;
/// not_supported names the field and value outside the supported layouts.
Result<Vocab> vocab_from_bpe_tokenizer_json(const nlohmann::json& doc, const nlohmann::json* config,
                                            const std::string& name);

}  // namespace troupe::tokenizer
