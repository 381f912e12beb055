#include "runtime/rank/models/decoder_arch.hpp"

#include <array>

namespace troupe::models {
namespace {

// llama.cpp: llama rotates consecutive pairs (its converter permutes Q/K for that); the
// qwen and phi families rotate NeoX halves (llama_model_rope_type). A window under llama
// is Mistral 7B v0.1's (transformers and vLLM apply it; llama.cpp b11434 does not read
// the key for llama, and its converter does not write it).
constexpr std::array<DecoderArch, 4> kArchs = {{
    {"llama", false, false, false, true, true},
    {"qwen2", true, false, false, false},
    {"qwen3", true, true, false, false},
    {"phi3", true, false, true, true, false, true},
}};

}  // namespace

const DecoderArch* find_decoder_arch(std::string_view arch) {
  for (const DecoderArch& a : kArchs)
    if (a.name == arch) return &a;
  return nullptr;
}

std::string decoder_arch_names() {
  std::string s;
  for (const DecoderArch& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

Status refuse_mixture_of_experts(const ModelSource& source, std::string_view arch) {
  const std::string p = std::string(arch) + ".";
  std::string found;
  if (auto n = source.get_int(p + "expert_count"); n && *n > 0)
    found = "'" + p + "expert_count' = " + std::to_string(*n);
  for (const char* t : {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_gate_exps.weight",
                        "blk.0.ffn_down_exps.weight"})
    if (found.empty() && source.tensor(t) != nullptr) found = "tensor '" + std::string(t) + "'";
  if (found.empty()) return {};
  return not_supported("mixture-of-experts models are not supported (architecture '" + std::string(arch) + "' with " +
                       found + "); supported architectures: " + decoder_arch_names() + ", bert");
}

}  // namespace troupe::models
