// WordPiece (BERT) text splitting: normalized words, in the two flavours a
// WordPieceConfig names. The WordPiece model itself (longest-match pieces)
// is Tokenizer::encode_wpm.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/request/tokenizer/vocab.hpp"

namespace troupe::tokenizer {

/// Hugging Face's BertNormalizer then BertPreTokenizer on UTF-8 `text`
/// (invalid bytes become U+FFFD, which clean_text drops): the words, each
/// punctuation character (ASCII punctuation or Unicode P*) a word of its own.
std::vector<std::string> bert_words(std::string_view text, const WordPieceConfig& config);

/// llama.cpp's llm_tokenizer_wpm_session::preprocess.
std::vector<std::string> llama_cpp_wpm_words(std::string_view text);

/// The words of `text` as `config.normalizer` says.
std::vector<std::string> wordpiece_words(std::string_view text, const WordPieceConfig& config);

}  // namespace troupe::tokenizer
