#include "runtime/rank/models/moe_shard.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "runtime/rank/models/llama_shard.hpp"
#include "troupe/dtype.hpp"

namespace troupe::models {

Result<MoeSplit> split_moe(const MoeHParams& moe, const std::vector<MoeLayerWeights>& layers, int tp_rank,
                           int tp_size, bool expert_parallel) {
  MoeSplit s;
  s.expert_parallel = expert_parallel && tp_size > 1;
  s.expert_end = moe.n_expert;
  s.ff_end = moe.n_ff_exp;
  if (tp_size == 1) return s;
  if (s.expert_parallel) {
    if (moe.n_expert < tp_size)
      return invalid_argument("expert parallelism over " + std::to_string(tp_size) + " ranks needs at least as many "
                              "experts; the model has " + std::to_string(moe.n_expert));
    const auto [e0, e1] = even_split(moe.n_expert, tp_rank, tp_size);
    s.expert_begin = static_cast<int>(e0);
    s.expert_end = static_cast<int>(e1);
    return s;
  }
  // Every expert's rows split in whole blocks of the largest block of any down matrix, so
  // every column slice is aligned and every layer and rank splits alike.
  int64_t unit = 1;
  for (const MoeLayerWeights& L : layers)
    for (const WeightTensor& d : L.down) unit = std::max(unit, traits(d.type).block_elems);
  if (moe.n_ff_exp % unit != 0 || moe.n_ff_exp / unit < tp_size)
    return invalid_argument("the experts' feed-forward size " + std::to_string(moe.n_ff_exp) +
                            " cannot be split over tensor parallel size " + std::to_string(tp_size) +
                            " in whole blocks of " + std::to_string(unit) +
                            " (the expert down weights' blocks); --enable-expert-parallel splits whole experts instead");
  const auto [u0, u1] = even_split(moe.n_ff_exp / unit, tp_rank, tp_size);
  s.ff_begin = u0 * unit;
  s.ff_end = u1 * unit;
  s.adds_down_bias = tp_rank == 0;
  return s;
}

Result<MoeShardLayer> shard_moe_layer(const MoeLayerWeights& w, const MoeSplit& s, int tp_rank, int tp_size) {
  MoeShardLayer L;
  L.router = *w.router;
  if (w.router_bias != nullptr) L.router_bias = *w.router_bias;
  const bool biased = !w.gate_bias.empty();
  for (int e = s.expert_begin; e < s.expert_end; ++e) {
    const auto i = static_cast<size_t>(e);
    L.gate.push_back(row_slice(w.gate[i], s.ff_begin, s.ff_end));
    L.up.push_back(row_slice(w.up[i], s.ff_begin, s.ff_end));
    auto down = column_slice(w.down[i], s.ff_begin, s.ff_end, tp_rank, tp_size);
    if (!down.ok()) return down.status();
    L.down.push_back(*down);
    if (!biased) continue;
    L.gate_bias.push_back(element_slice(&w.gate_bias[i], s.ff_begin, s.ff_end));
    L.up_bias.push_back(element_slice(&w.up_bias[i], s.ff_begin, s.ff_end));
    L.down_bias.push_back(s.adds_down_bias ? w.down_bias[i] : WeightTensor{});
  }
  return L;
}

Status place_moe_layer(MoeShardLayer& L, DeviceWeights& weights) {
  auto place = [&weights](WeightTensor& t) -> Status {
    if (t.data == nullptr) return {};
    auto placed = weights.place(t);
    if (!placed.ok()) return placed.status();
    t = *placed;
    return {};
  };
  TROUPE_RETURN_IF_ERROR(place(L.router));
  TROUPE_RETURN_IF_ERROR(place(L.router_bias));
  for (auto* list : {&L.gate, &L.up, &L.down, &L.gate_bias, &L.up_bias, &L.down_bias})
    for (WeightTensor& t : *list) TROUPE_RETURN_IF_ERROR(place(t));
  return {};
}

}  // namespace troupe::models
