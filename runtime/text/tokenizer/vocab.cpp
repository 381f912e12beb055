#include "runtime/text/tokenizer/vocab.hpp"

#include "runtime/text/tokenizer/tokenizer.hpp"
#include "troupe/log.hpp"

namespace troupe::tokenizer {

Result<PreTokenizer> parse_pre_tokenizer(const std::string& pre) {
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "phi-2" || pre == "roberta-bpe")
    return PreTokenizer::gpt2;
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell") return PreTokenizer::smollm;
  // llama.cpp b11434's names for the Llama-3 and Qwen2 pre-tokenizers.
  for (const char* name : {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                           "jina-v5-nano"}) {
    if (pre == name) return PreTokenizer::llama3;
  }
  for (const char* name : {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"}) {
    if (pre == name) return PreTokenizer::qwen2;
  }
  if (pre == "qwen35") return PreTokenizer::qwen35;
  if (pre == "tekken") return PreTokenizer::tekken;
  return not_supported(fmt::format(
      "pre-tokenizer '{}' is not supported (known: gpt-2, smollm, llama-bpe/llama3, qwen2, qwen35, tekken)", pre));
}

}  // namespace troupe::tokenizer
