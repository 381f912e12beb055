#include "runtime/model_files/gguf/llama3_rope_factors.hpp"

#include <cmath>

namespace troupe::models {

std::vector<float> llama3_rope_factors(const Llama3RopeParams& p, float theta, int rope_dim) {
  const double low_wavelen = p.original_context_length / p.low_freq_factor;
  const double high_wavelen = p.original_context_length / p.high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < rope_dim; i += 2) {
    const float freq = 1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(rope_dim));
    const double wavelen = 2 * M_PI / static_cast<double>(freq);
    double f = 1.0;
    if (wavelen < high_wavelen) {
      f = 1.0;
    } else if (wavelen > low_wavelen) {
      f = p.factor;
    } else {
      const double smooth =
          (p.original_context_length / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / p.factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

}  // namespace troupe::models
