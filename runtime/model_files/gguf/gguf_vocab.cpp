// A GGUF's tokenizer (tokenizer.ggml.*) as a tokenizer::Vocab, with llama.cpp
// b11434's defaults per tokenizer model: the text layer knows no file format.
#include "runtime/model_files/gguf/gguf_vocab.hpp"

#include <fmt/format.h>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/tokenizer_json_writer.hpp"
#include "troupe/log.hpp"

namespace troupe::gguf {

Result<tokenizer::Vocab> read_vocab(const GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model").value_or("");
  tokenizer::Vocab v;
  if (model == "llama") {
    v.kind = tokenizer::VocabKind::spm;
    // llama.cpp's SPM defaults.
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else if (model == "gpt2") {
    v.kind = tokenizer::VocabKind::bpe;
    v.bos_id = 11;
    v.eos_id = 11;
    const std::string pre = file.get_string("tokenizer.ggml.pre").value_or("default");
    auto p = tokenizer::parse_pre_tokenizer(pre);
    if (!p.ok()) return p.status();
    v.pre = *p;
    // As llama.cpp b11434 sets them for these two.
    if (v.pre == tokenizer::PreTokenizer::llama3 || v.pre == tokenizer::PreTokenizer::tekken) {
      v.ignore_merges = true;
      v.add_bos = true;
    }
  } else if (model == "bert") {
    // llama.cpp's WPM: its defaults, and its conversion of the vocabulary
    // ("x" -> "▁x" for word starts, "##x" -> "x" for continuations).
    v.kind = tokenizer::VocabKind::wpm;
    v.cls_id = 101;
    v.sep_id = 102;
    v.unk_id = 100;
    v.pad_id = 0;
    v.mask_id = 103;
    v.add_bos = true;  // [CLS]
    v.add_sep = true;
    v.wpm.normalizer = tokenizer::WordPieceConfig::Normalizer::llama_cpp;
    v.wpm.word_prefix = "\xE2\x96\x81";
    v.wpm.continuing_prefix.clear();
    v.wpm.max_input_chars_per_word = 0;
  } else if (model.empty()) {
    return not_found("GGUF file has no tokenizer (tokenizer.ggml.model is missing)");
  } else {
    return not_supported(fmt::format(
        "tokenizer model '{}' is not supported (supported: 'llama' (SentencePiece), 'gpt2' (byte-level BPE), "
        "'bert' (WordPiece))", model));
  }

  auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return data_loss("GGUF tokenizer: tokenizer.ggml.tokens is missing or not a string array");
  v.tokens = std::move(*tokens);
  if (file.has("tokenizer.ggml.scores")) {
    auto scores = file.get_float_array("tokenizer.ggml.scores");
    if (!scores) return data_loss("GGUF tokenizer: tokenizer.ggml.scores is not a float32 array");
    v.scores = std::move(*scores);
  }
  if (file.has("tokenizer.ggml.token_type")) {
    auto types = file.get_int_array("tokenizer.ggml.token_type");
    if (!types) return data_loss("GGUF tokenizer: tokenizer.ggml.token_type is not an integer array");
    v.types.reserve(types->size());
    for (int64_t t : *types) {
      v.types.push_back(t >= 0 && t <= 6 ? static_cast<tokenizer::TokenType>(t) : tokenizer::TokenType::undefined);
    }
  }
  if (v.kind == tokenizer::VocabKind::bpe) {
    auto merges = file.get_string_array("tokenizer.ggml.merges");
    if (!merges) return data_loss("GGUF tokenizer: byte-level BPE needs tokenizer.ggml.merges");
    v.merges = std::move(*merges);
  }

  const int64_t n = static_cast<int64_t>(v.tokens.size());
  auto special = [&](const char* key, int32_t* id) {
    auto val = file.get_int(key);
    if (!val) return;
    if (*val < 0 || *val >= n) {
      TROUPE_LOG_DEBUG("GGUF tokenizer: {} = {} is out of range; using {}", key, *val, *id);
      return;
    }
    *id = static_cast<int32_t>(*val);
  };
  special("tokenizer.ggml.bos_token_id", &v.bos_id);
  special("tokenizer.ggml.eos_token_id", &v.eos_id);
  special("tokenizer.ggml.eot_token_id", &v.eot_id);
  special("tokenizer.ggml.eom_token_id", &v.eom_id);
  special("tokenizer.ggml.unknown_token_id", &v.unk_id);
  special("tokenizer.ggml.padding_token_id", &v.pad_id);
  special("tokenizer.ggml.cls_token_id", &v.cls_id);
  special("tokenizer.ggml.seperator_token_id", &v.sep_id);  // sic: llama.cpp's key
  special("tokenizer.ggml.mask_token_id", &v.mask_id);
  special("tokenizer.ggml.fim_pre_token_id", &v.fim_pre_id);
  special("tokenizer.ggml.fim_suf_token_id", &v.fim_suf_id);
  special("tokenizer.ggml.fim_mid_token_id", &v.fim_mid_id);
  special("tokenizer.ggml.fim_pad_token_id", &v.fim_pad_id);
  special("tokenizer.ggml.fim_rep_token_id", &v.fim_rep_id);
  special("tokenizer.ggml.fim_sep_token_id", &v.fim_sep_id);
  special("tokenizer.ggml.prefix_token_id", &v.fim_pre_id);  // the deprecated names, read after as llama.cpp
  special("tokenizer.ggml.suffix_token_id", &v.fim_suf_id);
  special("tokenizer.ggml.middle_token_id", &v.fim_mid_id);
  if (v.kind == tokenizer::VocabKind::wpm && !file.has("tokenizer.ggml.bos_token_id")) v.bos_id = v.cls_id;
  if (auto b = file.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_sep_token")) v.add_sep = *b;
  if (v.kind == tokenizer::VocabKind::wpm) {
    // llama.cpp's BertNormalizer options: strip_accents follows lowercase unless given.
    v.wpm.lowercase = file.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
    v.wpm.strip_accents = file.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(v.wpm.lowercase);
  }
  return v;
}

Result<std::unique_ptr<tokenizer::Tokenizer>> read_tokenizer(const GgufFile& file) {
  auto v = read_vocab(file);
  if (!v.ok()) return v.status();
  return tokenizer::Tokenizer::from_vocab(std::move(*v));
}

Result<tokenizer::HfTokenizerFiles> hf_tokenizer_files(const GgufFile& file) {
  auto v = read_vocab(file);
  if (!v.ok()) return v.status();
  return tokenizer::write_hf_tokenizer(*v, file.get_string("tokenizer.chat_template").value_or(""));
}

}  // namespace troupe::gguf
