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
// YaRN and Phi-3's long-context factors (rope_factors_long/short) are refused by name.
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
  bool active() const { return !freq_factors.empty() || mscale != 1.0f; }
};

/// The scaling of `arch`'s file with rotary dimension rope_dim and base theta. A
/// rope_freqs tensor in a family that does not read it (reads_rope_freqs false) is refused.
Result<RopeScaling> read_rope_scaling(const ModelSource& source, const std::string& arch, int rope_dim, float theta,
                                      bool reads_rope_freqs);

}  // namespace troupe::models
