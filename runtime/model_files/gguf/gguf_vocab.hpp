// A GGUF file's tokenizer: its vocabulary (tokenizer.ggml.*) as a
// tokenizer::Vocab, the tokenizer built from it, and the Hugging Face files
// (tokenizer.json, tokenizer_config.json) that tokenize as it does.
#pragma once

#include <memory>

#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/tokenizer_json_writer.hpp"
#include "runtime/text/tokenizer/vocab.hpp"
#include "troupe/status.hpp"

namespace troupe::gguf {

class GgufFile;

/// The vocabulary of `file`, with llama.cpp's defaults for its tokenizer model ('llama'
/// SentencePiece, 'gpt2' byte-level BPE, 'bert' WordPiece); not_found when it has none.
Result<tokenizer::Vocab> read_vocab(const GgufFile& file);
/// The tokenizer of `file`.
Result<std::unique_ptr<tokenizer::Tokenizer>> read_tokenizer(const GgufFile& file);
/// tokenizer.json and tokenizer_config.json (with tokenizer.chat_template) for `file`'s tokenizer.
Result<tokenizer::HfTokenizerFiles> hf_tokenizer_files(const GgufFile& file);

}  // namespace troupe::gguf
