// The GGUF architectures the Llama-style decoder (llama_model.hpp) runs, and what
// differs between them, as llama.cpp (b11434) reads them: the RoPE pairing, which
// optional tensors each may or must have, fused projections, and the mixture-of-experts
// families' router and block (moe.md). A new family with the same block (pre-norm
// attention + gated MLP or experts) is one more row; one whose block differs (Gemma's
// post-norms and embedding scale) adds a trait here and the code that reads it, or gets
// a model of its own.
#pragma once

#include <string>
#include <string_view>

#include "runtime/rank/models/moe_routing.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

/// Whether a family's feed-forward blocks are experts.
enum class MoeUse {
  never,     // dense only; an expert count or expert tensors are refused
  optional,  // experts when the file has an expert_count (llama: Mixtral)
  always,    // every block is experts (qwen3moe, olmoe, gpt-oss)
};

struct DecoderArch {
  std::string_view name;      // general.architecture
  bool rope_neox = false;     // pairs (i, i+d/2) (llama.cpp's LLAMA_ROPE_TYPE_NEOX) instead of (2i, 2i+1)
  bool qk_norm = false;       // blk.N.attn_q_norm / attn_k_norm ({head_dim} RMS norms per head) are required
  bool fused_gate_up = false; // blk.N.ffn_up holds gate then up ({n_embd, 2*n_ff}); no ffn_gate
  bool rope_freqs = false;    // reads rope_freqs.weight (llama.cpp's qwen graphs pass no factors)
  bool sliding_window = false;// attention.sliding_window windows every layer (Mistral-style; phi3's key is
                              // ignored, as llama.cpp disables Phi's window)
  bool long_short_factors = false; // reads rope_factors_long/short.weight (Phi-3's long-context RoPE)
  // Mixture of experts (moe.md).
  MoeUse moe = MoeUse::never;
  MoeGating gating = MoeGating::softmax;
  bool moe_normalize = false; // the top-k weights divided by their sum (qwen3moe, Mixtral)
  bool qk_norm_full = false;  // attn_q_norm / attn_k_norm over the whole projection ({n_head*head_dim}, OLMoE)
  bool expert_ff_key = false; // the experts' rows are expert_feed_forward_length (else feed_forward_length)
  // gpt-oss (openai-moe in llama.cpp).
  bool swiglu_oai = false;    // experts' activation: clamped SwiGLU (alpha 1.702, limit 7), biased experts
  bool attn_sinks = false;    // blk.N.attn_sinks.weight: one sink logit per head
  bool attn_out_bias = false; // blk.N.attn_output.bias
  bool swa_pattern = false;   // attention.sliding_window on layers l with l % pattern < pattern - 1 (pattern 2)
  std::string_view ffn_norm = "ffn_norm";  // the norm before the FFN (gpt-oss: post_attention_norm)
};

/// The row of `arch`, or nullptr.
const DecoderArch* find_decoder_arch(std::string_view arch);
/// "llama, qwen2, qwen3, phi3, ...": the decoder architectures this build runs.
std::string decoder_arch_names();
/// not_supported for a mixture-of-experts file (an expert count, or expert tensors in the
/// first block) of a family without experts, naming what was found and the families that
/// have them.
Status refuse_mixture_of_experts(const ModelSource& source, std::string_view arch);

}  // namespace troupe::models
