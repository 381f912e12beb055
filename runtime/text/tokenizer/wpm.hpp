// WordPiece (BERT) text splitting: normalized words, in the two flavours a
// WordPieceConfig names. The WordPiece model itself (longest-match pieces)
// is Tokenizer::encode_wpm.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenizer/vocab.hpp"

namespace troupe::tokenizer {

/// Hugging Face's BertNormalizer then BertPreTokenizer on UTF-8 `text`
/// (invalid bytes become U+FFFD, which clean_text drops): the words, each
/// punctuation character (ASCII punctuation or Unicode P*) a word of its own.
std::vector<std::string> bert_words(std::string_view text, const WordPieceConfig& config);

/// llama.cpp b11434's llm_tokenizer_wpm_session::preprocess: invalid UTF-8
/// bytes as U+FFFD (then dropped), with strip_accents the first code point of
/// each character's NFD and no combining marks (\p{M}), simple lowercase when
/// asked, controls dropped, punctuation, ASCII symbols and CJK ideographs as
/// words of their own (Unicode 15.1 classes, as llama.cpp's tables).
std::vector<std::string> llama_cpp_wpm_words(std::string_view text, bool lowercase = true, bool strip_accents = true);

/// The words of `text` as `config.normalizer` says.
std::vector<std::string> wordpiece_words(std::string_view text, const WordPieceConfig& config);

}  // namespace troupe::tokenizer
