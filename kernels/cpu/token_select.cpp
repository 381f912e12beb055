#include "kernels/cpu/token_select.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace troupe::kernels::cpu {

int32_t select_token(const float* logits, int64_t vocab, float temperature, float top_p, float min_p, int32_t top_k,
                     double u, std::vector<float>& probs, std::vector<int32_t>& order) {
  if (vocab <= 0) return 0;
  if (!(temperature > 0.0f) || std::isinf(1.0f / temperature)) {  // 1/T overflowing is the greedy limit
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best]) best = i;
    return static_cast<int32_t>(best);
  }
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  const float inv_t = 1.0f / temperature;
  probs.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) probs[i] = std::exp((logits[i] - mx) * inv_t);  // max is 1
  order.resize(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  auto end = order.end();
  if (min_p > 0.0f) end = std::remove_if(order.begin(), end, [&](int32_t i) { return probs[i] < min_p; });
  const float* p = probs.data();
  auto higher = [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
  const auto kept = static_cast<int64_t>(end - order.begin());
  const int64_t k = top_k > 0 ? std::min<int64_t>(top_k, kept) : kept;
  std::partial_sort(order.begin(), order.begin() + k, end, higher);
  end = order.begin() + k;
  if (top_p < 1.0f) {
    double total = 0;
    for (auto it = order.begin(); it != end; ++it) total += p[*it];
    double cum = 0;
    for (auto it = order.begin(); it != end; ++it) {
      cum += p[*it];
      if (cum >= top_p * total) {
        end = it + 1;
        break;
      }
    }
  }
  if (end == order.begin()) return order.front();  // not reached: the max (1) survives min_p <= 1
  double total = 0;
  for (auto it = order.begin(); it != end; ++it) total += p[*it];
  const double target = u * total;
  double cum = 0;
  for (auto it = order.begin(); it != end; ++it) {
    cum += p[*it];
    if (target < cum) return *it;
  }
  return *(end - 1);
}

}  // namespace troupe::kernels::cpu
