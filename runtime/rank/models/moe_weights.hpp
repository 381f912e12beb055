// The experts of the mixture-of-experts families (decoder_arch.hpp): hyperparameters read
// from GGUF metadata as llama.cpp b11434 reads them, and each layer's router and experts
// bound and checked. Experts come as llama.cpp's merged 3-D tensors
// (blk.N.ffn_{gate,up,down}_exps.weight, ne = {in, out, n_expert}), of which each expert is a
// 2-D view, or as one 2-D tensor per expert (blk.N.ffn_{gate,up,down}.E.weight: older GGUF
// files and Hugging Face folders, which store experts one by one); nothing is copied.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/rank/models/decoder_arch.hpp"
#include "runtime/rank/models/moe_routing.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

struct MoeHParams {
  int n_expert = 0;          // 0: a dense model
  int n_used = 0;            // experts per token (expert_used_count)
  int64_t n_ff_exp = 0;      // rows of each expert's gate and up
  MoeRouter router;
  bool swiglu_oai = false;   // gpt-oss's clamped SwiGLU, biased experts
  float swiglu_alpha = 1.702f;
  float swiglu_limit = 7.0f;
  bool active() const { return n_expert > 0; }
};

/// The experts' hyperparameters of `arch` (its row `traits`): none for a dense family, an
/// error for a family with experts whose keys are missing or out of range. n_ff is the
/// file's feed_forward_length (0 when absent).
Result<MoeHParams> read_moe_hparams(const ModelSource& source, const DecoderArch& traits, const std::string& arch,
                                    int64_t n_ff);

/// One layer's router and experts: views into the file's tensors (the vectors own only the
/// view headers).
struct MoeLayerWeights {
  const WeightTensor* router = nullptr;       // ffn_gate_inp {n_embd, n_expert}
  const WeightTensor* router_bias = nullptr;  // ffn_gate_inp.bias {n_expert} f32 (gpt-oss)
  std::vector<WeightTensor> gate, up;         // [n_expert] {n_embd, n_ff_exp}
  std::vector<WeightTensor> down;             // [n_expert] {n_ff_exp, n_embd}
  std::vector<WeightTensor> gate_bias, up_bias;  // [n_expert] {n_ff_exp} f32, or empty
  std::vector<WeightTensor> down_bias;           // [n_expert] {n_embd} f32, or empty
  uint64_t expert_bytes = 0;  // one expert's gate, up and down bytes (the layer's largest)
};

/// Binds layer `layer`'s router and experts, checking presence, shape, type and size of each
/// (errors name the tensor and what the hyperparameters need).
Result<MoeLayerWeights> bind_moe_layer(const ModelSource& source, const MoeHParams& moe, const std::string& arch,
                                       int64_t n_embd, int layer);

}  // namespace troupe::models
