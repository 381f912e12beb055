#include "runtime/rank/models/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace troupe::models {

std::string_view to_string(MoeGating gating) {
  return gating == MoeGating::softmax ? "softmax" : "softmax_weight";
}

void route_tokens(const MoeRouter& r, const float* logits, int64_t n_tokens, MoeRoutes* routes) {
  const int E = r.n_expert, k = r.n_used;
  routes->n_used = k;
  routes->experts.resize(static_cast<size_t>(n_tokens * k));
  routes->weights.resize(static_cast<size_t>(n_tokens * k));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* l = logits + t * E;
    std::iota(order.begin(), order.end(), 0);
    // The k largest logits, larger first, the lower id first on ties (a total order, so
    // every rank and every batch chooses the same experts).
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [l](int32_t a, int32_t b) {
      return l[a] > l[b] || (l[a] == l[b] && a < b);
    });
    int32_t* ex = routes->experts.data() + t * k;
    float* w = routes->weights.data() + t * k;
    const double top = l[order[0]];
    double denom = 0;
    if (r.gating == MoeGating::softmax) {
      for (int e = 0; e < E; ++e) denom += std::exp(static_cast<double>(l[e]) - top);
    } else {
      for (int j = 0; j < k; ++j) denom += std::exp(static_cast<double>(l[order[j]]) - top);
    }
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      ex[j] = order[static_cast<size_t>(j)];
      const double p = std::exp(static_cast<double>(l[ex[j]]) - top) / denom;
      w[j] = static_cast<float>(p);
      sum += w[j];
    }
    if (r.normalize) {
      const double s = std::max(sum, 6.103515625e-5);  // llama.cpp clamps the sum at the smallest f16 normal
      for (int j = 0; j < k; ++j) w[j] = static_cast<float>(w[j] / s);
    }
    if (r.scale != 0.0f && r.scale != 1.0f)
      for (int j = 0; j < k; ++j) w[j] *= r.scale;
  }
}

void group_by_expert(const MoeRoutes& routes, int64_t n_tokens, int expert_begin, int expert_end,
                     ExpertGroups* g) {
  const int k = routes.n_used;
  const int local = expert_end - expert_begin;
  std::vector<int32_t> count(static_cast<size_t>(local), 0);
  for (int64_t i = 0; i < n_tokens * k; ++i) {
    const int32_t e = routes.experts[static_cast<size_t>(i)];
    if (e >= expert_begin && e < expert_end) ++count[static_cast<size_t>(e - expert_begin)];
  }
  g->expert.clear();
  g->begin.assign(1, 0);
  g->largest = 0;
  std::vector<int32_t> slot(static_cast<size_t>(local), -1);
  for (int e = 0; e < local; ++e) {
    const int32_t c = count[static_cast<size_t>(e)];
    if (c == 0) continue;
    slot[static_cast<size_t>(e)] = g->begin.back();
    g->expert.push_back(e);
    g->begin.push_back(g->begin.back() + c);
    g->largest = std::max(g->largest, c);
  }
  const auto n = static_cast<size_t>(g->begin.back());
  g->rows.resize(n);
  g->weights.resize(n);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int j = 0; j < k; ++j) {
      const int32_t e = routes.experts[static_cast<size_t>(t * k + j)];
      if (e < expert_begin || e >= expert_end) continue;
      const auto at = static_cast<size_t>(slot[static_cast<size_t>(e - expert_begin)]++);
      g->rows[at] = static_cast<int32_t>(t);
      g->weights[at] = routes.weights[static_cast<size_t>(t * k + j)];
    }
}

}  // namespace troupe::models
