// One rank's share of a mixture-of-experts layer, as views into the memory-mapped weights
// (nothing is copied), then placed in the platform's device memory. Over the tensor
// parallel ranks of a stage the experts are split in one of two ways, as vLLM splits them:
//  - expert parallelism (--enable-expert-parallel): rank r holds whole experts, a contiguous
//    range of them as even as possible; a token's experts are spread over the ranks;
//  - tensor parallelism (the default): every rank holds every expert, the rows
//    [ff_begin, ff_end) of its gate and up and the same columns of its down, in whole
//    blocks of the down matrices' type (as the dense FFN).
// Either way every rank routes every token (its router and the residual stream are the
// same on every rank), computes its share of each token's experts, and the shares are
// all-reduced: the sum is the one-rank result up to the order of the float additions.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/rank/models/moe_weights.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

struct MoeSplit {
  bool expert_parallel = false;
  int expert_begin = 0, expert_end = 0;  // this rank's experts
  int64_t ff_begin = 0, ff_end = 0;      // this rank's rows of every expert
  bool adds_down_bias = true;            // one rank adds each expert's down bias
};

/// The split of rank `tp_rank` of `tp_size`: expert parallel or not. invalid_argument when
/// the experts (expert parallelism) or n_ff_exp in whole blocks of the down matrices'
/// type (tensor parallelism) cannot be split that many ways, naming the other way.
Result<MoeSplit> split_moe(const MoeHParams& moe, const std::vector<MoeLayerWeights>& layers, int tp_rank,
                           int tp_size, bool expert_parallel);

struct MoeShardLayer {
  WeightTensor router;       // {n_embd, n_expert}, whole
  WeightTensor router_bias;  // {n_expert} (data null: none)
  std::vector<WeightTensor> gate, up, down;                // [local experts]
  std::vector<WeightTensor> gate_bias, up_bias, down_bias; // [local experts] or empty
};

/// The views of `split`'s share of one layer.
Result<MoeShardLayer> shard_moe_layer(const MoeLayerWeights& w, const MoeSplit& split, int tp_rank, int tp_size);
/// Replaces every view of `layer` by its place in `weights`' device memory.
Status place_moe_layer(MoeShardLayer& layer, DeviceWeights& weights);

}  // namespace troupe::models
