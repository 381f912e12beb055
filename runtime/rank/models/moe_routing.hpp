// The router of a mixture-of-experts layer, on the host: each token's top-k experts and
// their weights from the router's logits, then the step's assignments grouped by expert
// (so each expert's matrices run once over the tokens that chose it). Pure functions of
// their inputs, as llama.cpp b11434 computes them (llm_graph_context::build_moe_ffn):
//   softmax        probabilities = softmax over every expert; the top k by probability
//                  (= by logit), weights = their probabilities, divided by their sum when
//                  `normalize` (qwen3moe, Mixtral; not OLMoE)
//   softmax_weight the top k by logit, weights = softmax over those k logits (gpt-oss)
// then weights times `scale` when it is neither 0 nor 1 (expert_weights_scale).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace troupe::models {

enum class MoeGating { softmax, softmax_weight };

struct MoeRouter {
  int n_expert = 0;       // experts of the layer
  int n_used = 0;         // k: experts per token
  MoeGating gating = MoeGating::softmax;
  bool normalize = false; // divide the k weights by their sum (clamped below at 2^-14, as llama.cpp)
  float scale = 0.0f;     // expert_weights_scale: 0 or 1 leaves the weights as they are
};

/// "softmax" or "softmax_weight".
std::string_view to_string(MoeGating gating);

/// One step's choices: row t holds token t's k experts, the most probable first (ties: the
/// lower expert id first), and their weights.
struct MoeRoutes {
  int n_used = 0;
  std::vector<int32_t> experts;  // [T][n_used]
  std::vector<float> weights;    // [T][n_used]
};

/// Routes `n_tokens` rows of router logits ([n_tokens][n_expert], host memory).
void route_tokens(const MoeRouter& router, const float* logits, int64_t n_tokens, MoeRoutes* routes);

/// The assignments of a step to the experts [expert_begin, expert_end) (this rank's), grouped
/// by expert in ascending order, tokens ascending within a group. Experts no token chose
/// have no group. `expert` holds local indices (expert id - expert_begin).
struct ExpertGroups {
  std::vector<int32_t> expert;   // [groups] local expert index
  std::vector<int32_t> begin;    // [groups + 1] into rows / weights
  std::vector<int32_t> rows;     // token row of each assignment
  std::vector<float> weights;    // routing weight of each assignment
  int32_t groups() const { return static_cast<int32_t>(expert.size()); }
  int32_t largest = 0;           // tokens of the largest group
};
void group_by_expert(const MoeRoutes& routes, int64_t n_tokens, int expert_begin, int expert_end,
                     ExpertGroups* groups);

}  // namespace troupe::models
