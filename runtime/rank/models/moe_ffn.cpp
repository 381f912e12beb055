#include "runtime/rank/models/moe_ffn.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#include "troupe/ops.hpp"
#include "troupe/quantization.hpp"

namespace troupe::models {
namespace {

struct Observer {
  std::mutex mu;
  std::atomic<bool> set{false};
  MoeRouteObserver fn;
};
Observer& observer() {
  static Observer o;
  return o;
}

}  // namespace

void set_moe_route_observer(MoeRouteObserver fn) {
  Observer& o = observer();
  std::lock_guard lock(o.mu);
  o.set = static_cast<bool>(fn);
  o.fn = std::move(fn);
}

Result<std::unique_ptr<MoeFfn>> MoeFfn::create(const MoeHParams& moe, const MoeSplit& split,
                                               std::vector<MoeShardLayer> layers, int first_layer, int64_t n_embd,
                                               const ModelContext& ctx) {
  std::unique_ptr<MoeFfn> m(new MoeFfn(moe, split, std::move(layers), first_layer, n_embd, ctx));
  const Ops& ops = *ctx.ops;
  m->fused_ = named_ops::find<named_ops::MoeFfn>(ops);
  // A plugin's weight format has only its plugin's matmul: the experts go through Ops::matmul.
  for (const MoeShardLayer& L : m->layers_)
    for (const auto* list : {&L.gate, &L.up, &L.down})
      for (const WeightTensor& t : *list)
        if (!weight_formats::is_builtin(t.type)) m->fused_ = nullptr;
  m->gather_ = named_ops::find<named_ops::GatherRows>(ops);
  m->scatter_ = named_ops::find<named_ops::ScatterAddRows>(ops);
  m->swiglu_oai_ = named_ops::find<named_ops::SwigluOai>(ops);
  // Without the one-call op the block needs the pieces; refused at load, never in a step.
  if (m->fused_ == nullptr) {
    std::string missing;
    if (m->gather_ == nullptr) missing = named_ops::GatherRows::name;
    if (m->scatter_ == nullptr) missing = named_ops::ScatterAddRows::name;
    if (moe.swiglu_oai && m->swiglu_oai_ == nullptr) missing = named_ops::SwigluOai::name;
    if (!missing.empty())
      return not_supported("this mixture-of-experts model needs the platform op '" + missing + "' (or '" +
                           std::string(named_ops::MoeFfn::name) + "'), which the platform does not offer");
  }
  DeviceAllocator& mem = *ctx.allocator;
  const int64_t T = ctx.max_num_batched_tokens;
  TROUPE_RETURN_IF_ERROR(m->logits_.allocate(mem, T * moe.n_expert));
  if (m->fused_ == nullptr) {
    TROUPE_RETURN_IF_ERROR(m->xe_.allocate(mem, T * n_embd));
    TROUPE_RETURN_IF_ERROR(m->ye_.allocate(mem, T * n_embd));
    TROUPE_RETURN_IF_ERROR(m->h_.allocate(mem, T * m->ff_));
    TROUPE_RETURN_IF_ERROR(m->u_.allocate(mem, T * m->ff_));
  }
  return m;
}

MoeFfn::MoeFfn(const MoeHParams& moe, const MoeSplit& split, std::vector<MoeShardLayer> layers, int first_layer,
               int64_t n_embd, const ModelContext& ctx)
    : moe_(moe), split_(split), layers_(std::move(layers)), first_layer_(first_layer), n_embd_(n_embd),
      ff_(split.ff_end - split.ff_begin), ctx_(ctx) {}

// The router's logits (one matmul, plus gpt-oss's bias), on the host, routed and grouped.
Status MoeFfn::route(int local, const float* xn, int64_t T) {
  Ops& ops = *ctx_.ops;
  const MoeShardLayer& L = layers_[static_cast<size_t>(local)];
  const int64_t E = moe_.n_expert;
  ops.matmul(L.router, xn, T, logits_.data());
  if (L.router_bias.data != nullptr)
    ops.add_bias(logits_.data(), static_cast<const float*>(L.router_bias.data), T, E);
  const float* logits = logits_.data();
  if (!ctx_.allocator->host_addressable()) {
    host_logits_.resize(static_cast<size_t>(T * E));
    TROUPE_RETURN_IF_ERROR(ctx_.allocator->copy(host_logits_.data(), logits_.data(),
                                                T * E * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_host));
    logits = host_logits_.data();
  }
  route_tokens(moe_.router, logits, T, &routes_);
  if (Observer& o = observer(); o.set) {
    std::lock_guard lock(o.mu);
    if (o.fn) o.fn(first_layer_ + local, T, routes_);
  }
  group_by_expert(routes_, T, split_.expert_begin, split_.expert_end, &groups_);
  return {};
}

// Group g of the step: the expert's tokens gathered, its gate and up, the activation, its
// down, and each token's weighted share added to out.
void MoeFfn::run_group(const MoeShardLayer& L, int g, const float* xn, float* out) {
  Ops& ops = *ctx_.ops;
  const auto e = static_cast<size_t>(groups_.expert[static_cast<size_t>(g)]);
  const int32_t b = groups_.begin[static_cast<size_t>(g)];
  const int64_t n = groups_.begin[static_cast<size_t>(g) + 1] - b;
  const int32_t* rows = groups_.rows.data() + b;
  gather_(ops, xn, n_embd_, rows, n, xe_.data());
  const bool biased = !L.gate_bias.empty();
  if (!moe_.swiglu_oai && !biased) {
    ops.matmul_silu_mul(L.gate[e], L.up[e], xe_.data(), n, h_.data(), u_.data());
  } else {
    const WeightTensor* gu[2] = {&L.gate[e], &L.up[e]};
    float* gu_out[2] = {h_.data(), u_.data()};
    ops.matmul_multi(gu, gu_out, 2, xe_.data(), n);
    if (biased) {
      ops.add_bias(h_.data(), static_cast<const float*>(L.gate_bias[e].data), n, ff_);
      ops.add_bias(u_.data(), static_cast<const float*>(L.up_bias[e].data), n, ff_);
    }
    if (moe_.swiglu_oai) {
      swiglu_oai_(ops, h_.data(), u_.data(), n * ff_, moe_.swiglu_alpha, moe_.swiglu_limit, h_.data());
    } else {
      ops.silu_mul(h_.data(), u_.data(), n * ff_, h_.data());
    }
  }
  ops.matmul(L.down[e], h_.data(), n, ye_.data());
  if (biased && L.down_bias[e].data != nullptr)
    ops.add_bias(ye_.data(), static_cast<const float*>(L.down_bias[e].data), n, n_embd_);
  scatter_(ops, ye_.data(), n_embd_, rows, groups_.weights.data() + b, n, out);
}

Status MoeFfn::forward(int local, const float* xn, int64_t T, float* out) {
  TROUPE_RETURN_IF_ERROR(route(local, xn, T));
  const MoeShardLayer& L = layers_[static_cast<size_t>(local)];
  if (fused_ != nullptr) {
    named_ops::MoeExpertsView v;
    v.n_experts = static_cast<int32_t>(L.gate.size());
    v.gate = L.gate.data();
    v.up = L.up.data();
    v.down = L.down.data();
    if (!L.gate_bias.empty()) {
      v.gate_bias = L.gate_bias.data();
      v.up_bias = L.up_bias.data();
      v.down_bias = L.down_bias.data();
    }
    v.activation = moe_.swiglu_oai ? 1 : 0;
    v.alpha = moe_.swiglu_alpha;
    v.limit = moe_.swiglu_limit;
    named_ops::MoeAssignments a;
    a.n_groups = groups_.groups();
    a.expert = groups_.expert.data();
    a.begin = groups_.begin.data();
    a.rows = groups_.rows.data();
    a.weights = groups_.weights.data();
    fused_(*ctx_.ops, v, xn, T, n_embd_, a, out);
    return {};
  }
  TROUPE_RETURN_IF_ERROR(ctx_.allocator->fill_zero(out, T * n_embd_ * static_cast<int64_t>(sizeof(float))));
  for (int g = 0; g < groups_.groups(); ++g) run_group(L, g, xn, out);
  return {};
}

}  // namespace troupe::models
