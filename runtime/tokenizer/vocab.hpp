// The plain description of a tokenizer vocabulary, filled from GGUF metadata
// (tokenizer.ggml.*) or built by hand in tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::gguf {
class GgufFile;
}

namespace troupe::tokenizer {

/// GGUF token types (tokenizer.ggml.token_type), as llama.cpp's llama_token_type.
enum class TokenType : int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

enum class VocabKind { spm, bpe };

/// Pre-tokenizer of a byte-level BPE vocabulary (tokenizer.ggml.pre).
enum class PreTokenizer { gpt2, smollm, llama3, qwen2 };

struct Vocab {
  VocabKind kind = VocabKind::spm;
  PreTokenizer pre = PreTokenizer::gpt2;
  std::vector<std::string> tokens;
  std::vector<float> scores;        // empty or one per token (SPM merge priority)
  std::vector<TokenType> types;     // empty (all normal) or one per token
  std::vector<std::string> merges;  // BPE: "left right", highest priority first
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM dummy prefix
  bool ignore_merges = false;     // BPE: a whole pre-token found in the vocab wins (llama3)
};

/// Fill a Vocab from GGUF metadata with llama.cpp's defaults for absent keys.
/// "llama" -> SPM, "gpt2" -> byte-level BPE; other tokenizer models are not_supported.
Result<Vocab> vocab_from_gguf(const gguf::GgufFile& file);
/// Parse a tokenizer.ggml.pre value; not_supported names the known ones.
Result<PreTokenizer> parse_pre_tokenizer(const std::string& pre);

}  // namespace troupe::tokenizer
