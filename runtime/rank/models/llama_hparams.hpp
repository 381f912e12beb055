// Hyperparameters of the Llama-style decoders (llama, qwen2, qwen3, phi3 and the
// mixture-of-experts families qwen3moe, olmoe, gpt-oss and Mixtral: decoder_arch.hpp)
// read from GGUF metadata, and the validation of every weight tensor against them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/rank/models/moe_weights.hpp"
#include "runtime/rank/models/rope_scaling.hpp"
#include "troupe/model.hpp"
#include "troupe/ops.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

struct LlamaHParams {
  std::string arch;          // metadata key prefix ("llama", "qwen2"...)
  int64_t n_embd = 0;        // hidden size
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int64_t n_ff = 0;          // feed-forward size (from ffn_gate's shape); 0 for some MoE files
  int64_t n_vocab = 0;       // rows of token_embd
  int64_t n_ctx_train = 0;   // context_length
  int rope_dim = 0;          // rotary dims (must equal head_dim here)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool rope_neox = false;    // pairs (i, i+d/2) instead of (2i, 2i+1)
  bool qk_norm = false;      // per-head RMS norms of q and k before RoPE (qwen3)
  bool fused_gate_up = false;// ffn_up holds gate then up (phi3)
  int32_t sliding_window = 0;// every layer sees its last n keys (Mistral-style, llama only); 0: none
  RopeScaling rope_scaling;  // frequency factors (Llama 3's rope_freqs, linear scaling, Phi-3's long/short, YaRN)
  MoeHParams moe;            // experts instead of the dense FFN (moe.active())
  bool qk_norm_full = false; // olmoe: q and k RMS-normed over the whole projection
  bool attn_sinks = false;   // gpt-oss: a sink logit per head
  bool attn_out_bias = false;// gpt-oss: attn_output.bias
  std::vector<bool> swa_layers;  // gpt-oss: the layers windowed to swa_window keys (empty: none)
  int32_t swa_window = 0;
  std::string ffn_norm = "ffn_norm";  // the FFN's pre-norm tensor (gpt-oss: post_attention_norm)
};

/// The tensors of one transformer block (pointers into the ModelSource).
struct LlamaLayerWeights {
  const WeightTensor* attn_norm = nullptr;  // {n_embd} f32
  const WeightTensor* wq = nullptr;         // {n_embd, n_head*head_dim}
  const WeightTensor* wk = nullptr;         // {n_embd, n_head_kv*head_dim}
  const WeightTensor* wv = nullptr;         // {n_embd, n_head_kv*head_dim}
  const WeightTensor* wo = nullptr;         // {n_head*head_dim, n_embd}
  const WeightTensor* ffn_norm = nullptr;   // {n_embd} f32
  const WeightTensor* ffn_gate = nullptr;   // {n_embd, n_ff}
  const WeightTensor* ffn_up = nullptr;     // {n_embd, n_ff}
  const WeightTensor* ffn_down = nullptr;   // {n_ff, n_embd}
  const WeightTensor* bq = nullptr;         // {n_head*head_dim} f32, optional (qwen2)
  const WeightTensor* bk = nullptr;         // {n_head_kv*head_dim} f32, optional
  const WeightTensor* bv = nullptr;         // {n_head_kv*head_dim} f32, optional
  const WeightTensor* q_norm = nullptr;     // {head_dim} f32 (qwen3); {n_head*head_dim} (olmoe)
  const WeightTensor* k_norm = nullptr;     // {head_dim} f32 (qwen3); {n_head_kv*head_dim} (olmoe)
  const WeightTensor* bo = nullptr;         // {n_embd} f32 (gpt-oss)
  const WeightTensor* sinks = nullptr;      // {n_head} f32 (gpt-oss)
  MoeLayerWeights moe{};                    // the experts (hp.moe.active(); ffn_gate/up/down stay null)
};

struct LlamaWeights {
  const WeightTensor* token_embd = nullptr;   // {n_embd, n_vocab}
  const WeightTensor* output_norm = nullptr;  // {n_embd} f32
  const WeightTensor* output = nullptr;       // {n_embd, n_vocab}; token_embd when tied
  bool tied_output = false;
  std::vector<LlamaLayerWeights> layers;
  // Views of fused tensors (phi3's attn_qkv and ffn_up, as llama.cpp splits them): rows of
  // the file's tensor, owned here so that the layers' pointers stay valid.
  std::vector<std::unique_ptr<WeightTensor>> views;
  uint64_t bytes_per_token = 0;  // weight bytes one forward reads (embedding: one row; MoE: the used experts)
};

/// Tensor `name` of `source`, checked: present (else not_found), shape {ne0} (ne1 <= 0) or
/// {ne0, ne1}, f32 when f32_only, a known type whose bytes match the shape.
Result<const WeightTensor*> expect_weight(const ModelSource& source, const std::string& name, int64_t ne0,
                                          int64_t ne1, bool f32_only);
/// Read the hyperparameters of `source` (keys "<arch>.embedding_length", ...). engine_context
/// is the engine's max_model_len (0: the file's context_length); Phi-3's long-context RoPE
/// picks its factor set from it.
Result<LlamaHParams> read_llama_hparams(const ModelSource& source, int64_t engine_context = 0);
/// Find and check every tensor: presence (not_found), type and shape (invalid_argument/data_loss).
Result<LlamaWeights> bind_llama_weights(const ModelSource& source, const LlamaHParams& hp);
/// Ask the platform's ops whether they compute every matrix of `w` (embedding, output, the
/// blocks' projections); the first that they cannot is a not_supported naming the tensor.
Status check_llama_weight_types(const LlamaWeights& w, const Ops& ops);

}  // namespace troupe::models
