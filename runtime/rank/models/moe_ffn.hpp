// A mixture-of-experts feed-forward block over the platform's Ops: once per layer and
// step the router's logits (one matmul), the routing on the host (moe_routing.hpp), the
// step's assignments grouped by expert, then each chosen expert of this rank runs once
// over the tokens that chose it, through the platform's moe_ffn.v1 when it has one, else
// through gather_rows.v1, the matmuls and scatter_add_rows.v1. Experts no token chose are
// never read. The output is this rank's share (moe_shard.hpp): the caller all-reduces it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/rank/models/moe_shard.hpp"
#include "troupe/device_memory.hpp"
#include "troupe/model.hpp"
#include "troupe/named_ops/moe_ops.hpp"
#include "troupe/status.hpp"

namespace troupe::models {

/// Called with every layer's routes (tests compare the router's choices with references).
/// layer is the model's layer index; routes.experts holds global expert ids.
using MoeRouteObserver = std::function<void(int layer, int64_t n_tokens, const MoeRoutes& routes)>;
/// Sets (or, with an empty function, clears) the process's observer.
void set_moe_route_observer(MoeRouteObserver observer);

class MoeFfn {
 public:
  /// `layers` are this rank's placed shares of its stage's layers. not_supported naming the op
  /// when the platform lacks one the block needs.
  static Result<std::unique_ptr<MoeFfn>> create(const MoeHParams& moe, const MoeSplit& split,
                                                std::vector<MoeShardLayer> layers, int first_layer, int64_t n_embd,
                                                const ModelContext& ctx);
  /// out[T][n_embd] (overwritten) = this rank's share of the experts of layer `local` (of the
  /// stage) for the normed input xn[T][n_embd].
  Status forward(int local, const float* xn, int64_t n_tokens, float* out);
  const MoeSplit& split() const { return split_; }

 private:
  MoeFfn(const MoeHParams& moe, const MoeSplit& split, std::vector<MoeShardLayer> layers, int first_layer,
         int64_t n_embd, const ModelContext& ctx);
  Status route(int local, const float* xn, int64_t n_tokens);
  void run_group(const MoeShardLayer& L, int g, const float* xn, float* out);

  MoeHParams moe_;
  MoeSplit split_;
  std::vector<MoeShardLayer> layers_;
  int first_layer_ = 0;
  int64_t n_embd_ = 0;
  int64_t ff_ = 0;  // this rank's rows of each expert
  ModelContext ctx_;
  named_ops::MoeFfn::Fn fused_ = nullptr;
  named_ops::GatherRows::Fn gather_ = nullptr;
  named_ops::ScatterAddRows::Fn scatter_ = nullptr;
  named_ops::SwigluOai::Fn swiglu_oai_ = nullptr;
  MoeRoutes routes_;
  ExpertGroups groups_;
  std::vector<float> host_logits_;   // the router's logits copied from a device
  DeviceArray<float> logits_;        // [T][n_expert]
  DeviceArray<float> xe_, ye_;       // [T][n_embd]: an expert's tokens, its output
  DeviceArray<float> h_, u_;         // [T][ff]: gate (then the activation), up
};

}  // namespace troupe::models
