// RoPE scaling of a GGUF file, as per-pair frequency factors (named_ops::RopeFreqFactors):
// pair i's angle is divided by factor i. llama.cpp (b11434) reads the factors from the
// `rope_freqs.weight` tensor (Llama 3.x: its converter writes them from HF's "llama3"
// rope_scaling) and `<arch>.rope.scaling.type` "linear" with `.factor` (every pair's
// frequency divided by it), with `.attn_factor` scaling the rotated values.
//
// When the tensor is absent, troupe also takes the llama3 rule from keys named as HF's
// config names them: `<arch>.rope.scaling.type` = "llama3" with `.factor`,
// `.low_freq_factor`, `.high_freq_factor` and `.original_context_length`. llama.cpp
// writes no such keys and refuses that type; a tensor, when present, always wins.
//
// Phi-3's long-context RoPE (HF "longrope", first named "su": Phi-3-mini-128k, Phi-3.5-mini)
// is two f32 tensors of rope_dim/2 divisors, `rope_factors_long.weight` and
// `rope_factors_short.weight`, with `.attn_factor` (the converter writes
// sqrt(1 + ln(s) / ln(original)), s = context_length / original) scaling cos and sin. Which
// set runs is chosen ONCE, as llama.cpp b11434 chooses it (llama_model::get_rope_factors):
// long when the engine's per-sequence context (max_model_len; the file's context_length when
// unset) exceeds `.original_context_length` (default: context_length), else short. Every
// position of every sequence then rotates with that set. Hugging Face transformers instead
// switches per forward on the sequence's length (long once max(position_ids) + 1 exceeds
// original_max_position_embeddings), so keys cached while a sequence was short keep the
// short rotation after the switch. vLLM switched per batch (long when a position passed the
// original length) before it moved to the one-time rule (max_model_len > original) "to
// prevent KV cache invalidation when sequences cross this threshold": under a switch, keys
// already cached, and prefix-cache blocks reused later, were rotated with the other set, so
// results depended on what the cache held. With one set per engine a block's keys depend
// only on its tokens, so prefix caching stays exact.
// YaRN (gpt-oss: `.type` "yarn", `.factor`, `.original_context_length`) is frequency factors
// too: rope_scaling.cpp's read_yarn has ggml's formulas.
#pragma once

#include <string>
#include <vector>

#include "runtime/model_files/gguf/llama3_rope_factors.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

struct RopeScaling {
  std::vector<float> freq_factors;  // rope_dim/2 divisors; empty: plain RoPE
  float mscale = 1.0f;              // rope.scaling.attn_factor
  std::string description;          // for the load log: "rope_freqs.weight", "linear x4"...
  bool long_factors = false;        // Phi-3: rope_factors_long chosen (else short, or none)
  bool active() const { return !freq_factors.empty() || mscale != 1.0f; }
};

/// What the reader needs to know of the file's family and of the engine.
struct RopeScalingQuery {
  std::string arch;                      // key prefix
  int rope_dim = 0;                      // rotary dimensions
  float theta = 10000.0f;                // rope.freq_base
  bool reads_rope_freqs = false;         // the family reads rope_freqs.weight (llama, phi3)
  bool reads_long_short_factors = false; // the family reads rope_factors_long/short (phi3)
  int64_t n_ctx_train = 0;               // context_length
  int64_t engine_context = 0;            // max_model_len; 0: n_ctx_train
};

/// The scaling of the file. A rope_freqs or long/short tensor in a family that does not
/// read it is refused.
Result<RopeScaling> read_rope_scaling(const ModelSource& source, const RopeScalingQuery& q);

}  // namespace troupe::models
