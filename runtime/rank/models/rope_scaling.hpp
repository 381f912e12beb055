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

#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

struct RopeScaling {
  std::vector<float> freq_factors;  // rope_dim/2 divisors; empty: plain RoPE
  float mscale = 1.0f;              // rope.scaling.attn_factor
  std::string description;          // for the load log: "rope_freqs.weight", "linear x4"...
  bool active() const { return !freq_factors.empty() || mscale != 1.0f; }
};

struct Llama3RopeParams {
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  float original_context_length = 8192.0f;
};

/// The llama3 factors of rope_dim/2 pairs at base theta, as llama.cpp's converter computes
/// them (frequencies in float32, wavelengths in double): 1 for wavelengths below
/// original/high_freq_factor, factor above original/low_freq_factor, interpolated between.
std::vector<float> llama3_rope_factors(const Llama3RopeParams& p, float theta, int rope_dim);

/// The scaling of `arch`'s file with rotary dimension rope_dim and base theta. A
/// rope_freqs tensor in a family that does not read it (reads_rope_freqs false) is refused.
Result<RopeScaling> read_rope_scaling(const ModelSource& source, const std::string& arch, int rope_dim, float theta,
                                      bool reads_rope_freqs);

}  // namespace troupe::models
