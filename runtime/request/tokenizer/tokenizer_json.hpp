// Hugging Face tokenizer.json (the `tokenizers` library's format) to a Vocab,
// for WordPiece models. Tokenizer::from_tokenizer_json reads the file and uses this.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/request/tokenizer/vocab.hpp"
#include "troupe/status.hpp"

namespace troupe::tokenizer {

/// The Vocab of a parsed tokenizer.json whose model is WordPiece; errors
/// start with `name` (the file's path) and say which field is wrong.
Result<Vocab> vocab_from_tokenizer_json(const nlohmann::json& doc, const std::string& name);

}  // namespace troupe::tokenizer
