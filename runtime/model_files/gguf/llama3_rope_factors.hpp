// Llama 3.x's RoPE frequency factors as llama.cpp's converter writes them into a
// GGUF's rope_freqs.weight tensor from Hugging Face's "llama3" rope_scaling. The
// file's writer (make-gguf) and its reader (runtime/rank/models/rope_scaling) share it.
#pragma once

#include <vector>

namespace troupe::models {

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

}  // namespace troupe::models
