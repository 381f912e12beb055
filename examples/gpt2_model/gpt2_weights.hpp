// GPT-2's hyperparameters and weights as llama.cpp's converter writes them in a GGUF file
// (general.architecture "gpt2"), read through the SDK's ModelSource only. Every refusal
// is one line naming the key or the tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/ops.hpp"
#include "troupe/status.hpp"

namespace gpt2 {

struct HParams {
  int64_t n_vocab = 0;  // rows of token_embd.weight
  int64_t n_ctx = 0;    // gpt2.context_length: the learned positions
  int64_t n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int head_dim = 0;
  int64_t n_ff = 0;
  float norm_eps = 1e-5f;  // gpt2.attention.layer_norm_epsilon
};

/// The keys gpt2.{context_length, embedding_length, block_count, feed_forward_length,
/// attention.head_count, attention.layer_norm_epsilon} and the vocabulary size (the rows of
/// token_embd.weight). A head_count_kv other than head_count is refused (GPT-2 has none).
troupe::Result<HParams> read_hparams(const troupe::ModelSource& source);

/// One block's tensors, host views of the file. GPT-2 fuses q, k and v in attn_qkv; the
/// views q/k/v (rows of the weight, elements of the bias) are what the model places.
struct LayerWeights {
  const troupe::WeightTensor *attn_norm, *attn_norm_b;
  troupe::WeightTensor wq, wk, wv, bq, bk, bv;
  const troupe::WeightTensor *wo, *wo_b;
  const troupe::WeightTensor *ffn_norm, *ffn_norm_b;
  const troupe::WeightTensor *ffn_up, *ffn_up_b, *ffn_down, *ffn_down_b;
};

struct Weights {
  const troupe::WeightTensor *token_embd = nullptr, *position_embd = nullptr;
  const troupe::WeightTensor *output_norm = nullptr, *output_norm_b = nullptr;
  const troupe::WeightTensor* output = nullptr;  // token_embd when the file has no output.weight (tied)
  std::vector<LayerWeights> layers;
  uint64_t bytes_per_token = 0;  // weight bytes one forward reads per token (ModelInfo::weight_bytes)
};

/// Every tensor llama.cpp's gpt2 loader requires, with its shape; matrices of a type `ops`
/// computes, vectors (norms, biases) f32. Missing, misshapen or uncomputable: the error
/// names the tensor.
troupe::Result<Weights> bind_weights(const troupe::ModelSource& source, const HParams& hp, const troupe::Ops& ops);

}  // namespace gpt2
