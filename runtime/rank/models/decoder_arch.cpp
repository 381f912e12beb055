#include "runtime/rank/models/decoder_arch.hpp"

#include <array>

namespace troupe::models {
namespace {

// llama.cpp: llama rotates consecutive pairs (its converter permutes Q/K for that); the
// qwen, phi, olmoe and gpt-oss families rotate NeoX halves (llama_model_rope_type). A window
// under llama is Mistral 7B v0.1's (transformers and vLLM apply it; llama.cpp b11434 does not
// read the key for llama, and its converter does not write it). The experts' routers as
// src/models/{llama,qwen3moe,olmoe,openai-moe}.cpp call build_moe_ffn.
constexpr std::array<DecoderArch, 7> kArchs = {{
    {.name = "llama", .rope_freqs = true, .sliding_window = true, .moe = MoeUse::optional,
     .moe_normalize = true},
    {.name = "qwen2", .rope_neox = true},
    {.name = "qwen3", .rope_neox = true, .qk_norm = true},
    {.name = "phi3", .rope_neox = true, .fused_gate_up = true, .rope_freqs = true, .long_short_factors = true},
    {.name = "qwen3moe", .rope_neox = true, .qk_norm = true, .moe = MoeUse::always, .moe_normalize = true,
     .expert_ff_key = true},
    {.name = "olmoe", .rope_neox = true, .moe = MoeUse::always, .qk_norm_full = true},
    {.name = "gpt-oss", .rope_neox = true, .moe = MoeUse::always, .gating = MoeGating::softmax_weight,
     .expert_ff_key = true, .swiglu_oai = true, .attn_sinks = true, .attn_out_bias = true, .swa_pattern = true,
     .ffn_norm = "post_attention_norm"},
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
  std::string moe;
  for (const DecoderArch& a : kArchs)
    if (a.moe != MoeUse::never) moe += (moe.empty() ? "" : ", ") + std::string(a.name);
  return not_supported("architecture '" + std::string(arch) + "' has no mixture-of-experts variant here (found " +
                       found + "); mixture-of-experts architectures: " + moe);
}

}  // namespace troupe::models
