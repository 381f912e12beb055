// Hyperparameters and weights of Gemma 2 and Gemma 3 GGUF files (llama.cpp's
// "gemma2" / "gemma3" architectures): keys, defaults and the local/global layer
// pattern as llama.cpp b11434 reads them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/ops.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

struct GemmaHParams {
  std::string arch;              // "gemma2" or "gemma3"
  int64_t n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;              // attention.key_length (value_length must match)
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-6f;
  float rope_theta = 10000.0f;        // global layers
  float rope_theta_local = 10000.0f;  // sliding-window layers (rope.freq_base_swa)
  int32_t sliding_window = 0;         // 0: no layer is windowed
  std::vector<bool> is_local;         // per layer: windowed (local) or global
  float attn_scale = 1.0f;            // query pre-attention scaling (1/sqrt(head_dim) or 1/sqrt(n_embd/n_head))
  float attn_softcap = 0.0f;          // Gemma 2: attention logit soft-capping
  float final_softcap = 0.0f;         // final logit soft-capping (0: none)
  bool qk_norm = false;               // Gemma 3: RMS norms on each head's q and k
};

struct GemmaLayerWeights {
  const WeightTensor* attn_norm = nullptr;
  const WeightTensor* wq = nullptr;
  const WeightTensor* wk = nullptr;
  const WeightTensor* wv = nullptr;
  const WeightTensor* wo = nullptr;
  const WeightTensor* q_norm = nullptr;         // gemma3: {head_dim}
  const WeightTensor* k_norm = nullptr;         // gemma3: {head_dim}
  const WeightTensor* post_attn_norm = nullptr;
  const WeightTensor* ffn_norm = nullptr;
  const WeightTensor* ffn_gate = nullptr;
  const WeightTensor* ffn_up = nullptr;
  const WeightTensor* ffn_down = nullptr;
  const WeightTensor* post_ffn_norm = nullptr;
};

struct GemmaWeights {
  const WeightTensor* token_embd = nullptr;
  const WeightTensor* output_norm = nullptr;
  const WeightTensor* output = nullptr;  // token_embd when tied (always for gemma2)
  std::vector<GemmaLayerWeights> layers;
  uint64_t bytes_per_token = 0;
};

/// Read the hyperparameters of a gemma2/gemma3 file; clear errors for what is missing or
/// unsupported (rope scaling).
Result<GemmaHParams> read_gemma_hparams(const ModelSource& source);
/// Find and check every tensor (presence, shape, type, size).
Result<GemmaWeights> bind_gemma_weights(const ModelSource& source, const GemmaHParams& hp);
/// The ops' refusal of the first matrix they cannot compute, naming the tensor.
Status check_gemma_weight_types(const GemmaWeights& w, const Ops& ops);

}  // namespace troupe::models
