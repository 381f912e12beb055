// Named model shapes for the dummy load format (random weights, vLLM's
// --load-format dummy): the architecture and hyperparameters of a known model,
// with the optional tensors and keys its real GGUF has, and the weight types a
// dummy model can be built in. gemma2/gemma3 shapes get Gemma's block (post-attention
// and post-FFN norms) from their architecture; their keys are the fields below. The gpt2
// shape gets GPT-2's block from its architecture (learned positions, layer norms with
// biases, fused attn_qkv, every projection biased, a GELU MLP); rms_eps is its
// layer_norm_epsilon, and the RoPE and KV-head fields do not apply.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/dtype.hpp"
#include "troupe/status.hpp"

namespace troupe::dummy {

/// Llama 3.x's "llama3" rope_scaling (config.json), written as the rope_freqs tensor.
struct Llama3RopeScaling {
  float factor = 0;  // 0: none
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_context_length = 8192;
};

struct ModelShape {
  std::string name;         // "llama-3.2-1b"
  std::string source;       // where the numbers come from
  std::string arch = "llama";  // general.architecture: llama, qwen2, qwen3, phi3, gemma2, gemma3, gpt2, qwen3moe, olmoe, gpt-oss
  int64_t n_embd = 0;       // hidden size
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int64_t n_ff = 0;         // feed-forward size
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;        // context_length
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = true;  // no output.weight: the head reuses token_embd
  int64_t key_length = 0;       // head dim when it is not n_embd / n_head (qwen3): attention.key_length
  bool qkv_bias = false;        // blk.N.attn_{q,k,v}.bias (qwen2)
  bool qk_norm = false;         // blk.N.attn_{q,k}_norm.weight (qwen3, gemma3)
  bool fused_qkv = false;       // blk.N.attn_qkv.weight instead of attn_q/k/v (phi3)
  bool fused_gate_up = false;   // blk.N.ffn_up.weight holds gate and up, no ffn_gate (phi3)
  int64_t sliding_window = 0;   // attention.sliding_window key (phi3 writes it and llama.cpp ignores it there;
                                // gemma2/gemma3 window their local layers; a llama file: every layer, Mistral-style)
  float attn_softcap = 0;       // attn_logit_softcapping key (gemma2)
  float final_softcap = 0;      // final_logit_softcapping key (gemma2)
  bool rope_theta_key = true;   // rope.freq_base written (gemma2's converter leaves it out: 10000)
  int64_t rope_original_context = 0;  // rope.scaling.original_context_length key (phi3)
  bool longrope = false;              // Phi-3's long-context RoPE: rope_factors_long/short.weight and
                                      // rope.scaling.attn_factor, as llama.cpp's converter writes them
  Llama3RopeScaling llama3_rope;      // rope_freqs.weight (Llama 3.x)
  // Gemma 2/3 (post-attention and post-FFN norms; gemma3 also q/k norms): sliding_window
  // above is every local layer's window.
  int64_t sliding_window_pattern = 0; // attention.sliding_window_pattern (gemma3; gemma2 alternates)
  float rope_theta_swa = 0;           // rope.freq_base_swa (gemma3's local layers)
  // Mixture of experts (qwen3moe, olmoe, gpt-oss; llama with experts is Mixtral): every
  // block's FFN is n_expert experts, n_expert_used per token, stored as llama.cpp's merged
  // 3-D tensors blk.N.ffn_{gate,up,down}_exps.weight behind a router blk.N.ffn_gate_inp.weight
  // (f32, as llama-quantize leaves it). olmoe's q/k norms span the whole projection; gpt-oss
  // gets its biases (q/k/v, attn_output, router, experts), attn_sinks, post_attention_norm in
  // place of ffn_norm, windows on its even layers and YaRN (yarn_factor).
  int n_expert = 0;
  int n_expert_used = 0;
  int64_t n_ff_exp = 0;               // expert_feed_forward_length written when > 0 (else experts are n_ff wide)
  float yarn_factor = 0;              // rope.scaling.type yarn with this factor (gpt-oss)
  int64_t yarn_original_context = 0;  // rope.scaling.original_context_length of YaRN
  bool moe() const { return n_expert > 0; }
  int64_t expert_ff() const { return n_ff_exp > 0 ? n_ff_exp : n_ff; }
  bool gpt_oss() const { return arch == "gpt-oss"; }
  int64_t head_dim() const { return key_length > 0 ? key_length : n_embd / n_head; }
  bool gemma() const { return arch == "gemma2" || arch == "gemma3"; }
  bool gpt2() const { return arch == "gpt2"; }
};

/// Every named shape, in a fixed order.
const std::vector<ModelShape>& model_shapes();
/// The shape called `name`; invalid_argument listing the valid names otherwise.
Result<ModelShape> find_model_shape(std::string_view name);

/// The weight types a dummy model can hold (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k
/// q4_k q5_k q6_k iq4_nl iq4_xs mxfp4). mxfp4 is llama.cpp's MXFP4_MOE mix: the experts in
/// MXFP4, every other matrix q8_0 (a model without experts is all q8_0).
const std::vector<DType>& dummy_weight_types();
/// `name` as one of those types; invalid_argument listing them otherwise.
Result<DType> parse_weight_type(std::string_view name);
/// ok when every matrix row of `shape` is a whole number of `type`'s blocks; else
/// invalid_argument naming the rows that are not and the types that fit.
Status check_shape_fits(const ModelShape& shape, DType type);
/// GGUF type id 39 (ggml's GGML_TYPE_MXFP4): a DType value without an enumerator, so the
/// SDK's dtype.hpp stays as it is; its layout is in the weight-format registry.
inline constexpr DType kMxfp4 = static_cast<DType>(39);
/// The type of `shape`'s matrices in a model of `type`: the experts' (expert) or the others'.
DType matrix_type(DType type, bool expert);

}  // namespace troupe::dummy
