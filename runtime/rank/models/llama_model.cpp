#include "runtime/rank/models/llama_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "troupe/attention.hpp"
#include "troupe/communicator.hpp"
#include "troupe/log.hpp"
#include "troupe/lora.hpp"
#include "troupe/ops.hpp"

namespace troupe::models {

Result<std::unique_ptr<Model>> LlamaModel::create(const ModelSource& source, const ModelContext& context) {
  if (!context.ops || !context.attention || !context.allocator)
    return invalid_argument("the llama model needs the platform's ops, attention backend and allocator");
  if (context.max_num_batched_tokens <= 0 || context.max_num_batched_tokens > (int64_t{1} << 20))
    return invalid_argument("max_num_batched_tokens " + std::to_string(context.max_num_batched_tokens) +
                            " is out of range");
  auto hp = read_llama_hparams(source, std::max<int64_t>(0, context.setting_int("model.max_model_len")));
  if (!hp.ok()) return hp.status();
  // The split is checked before any weight is looked at, with vLLM's wording.
  const int tp = context.tp_size, pp = context.pp_size;
  TROUPE_RETURN_IF_ERROR(check_llama_parallel(*hp, tp, pp));
  if (context.tp_rank < 0 || context.tp_rank >= tp || context.pp_rank < 0 || context.pp_rank >= pp)
    return invalid_argument("tensor rank " + std::to_string(context.tp_rank) + " / pipeline rank " +
                            std::to_string(context.pp_rank) + " are outside tensor parallel size " +
                            std::to_string(tp) + " x pipeline parallel size " + std::to_string(pp));
  if (tp * pp > 1) {
    const DeviceCommunicator* world = context.communicator;
    const int rank = context.pp_rank * tp + context.tp_rank;
    if (world == nullptr || world->world_size() != tp * pp || world->rank() != rank)
      return invalid_argument("the llama model split over " + std::to_string(tp * pp) +
                              " ranks needs a communicator of every rank in which it is rank " + std::to_string(rank));
    const DeviceCommunicator* group = context.tp_communicator;
    if (tp > 1 && (group == nullptr || group->world_size() != tp || group->rank() != context.tp_rank))
      return invalid_argument("the llama model split over tensor parallel size " + std::to_string(tp) +
                              " needs the communicator of its pipeline stage's ranks, in which it is rank " +
                              std::to_string(context.tp_rank));
  }
  named_ops::RopeFreqFactors::Fn rope_freq_factors = nullptr;
  if (hp->rope_scaling.active()) {
    rope_freq_factors = named_ops::find<named_ops::RopeFreqFactors>(*context.ops);
    if (rope_freq_factors == nullptr)
      return not_supported("this model's rope scaling (" + hp->rope_scaling.description +
                           ") needs the platform op '" + std::string(named_ops::RopeFreqFactors::name) +
                           "', which the platform does not offer");
  }
  auto w = bind_llama_weights(source, *hp);
  if (!w.ok()) return w.status();
  TROUPE_RETURN_IF_ERROR(check_llama_weight_types(*w, *context.ops));
  auto shard = shard_llama_weights(*hp, *w, context.tp_rank, tp, context.pp_rank, pp);
  if (!shard.ok()) return shard.status();
  std::unique_ptr<LlamaModel> model(new LlamaModel(std::move(*hp), std::move(*w), std::move(*shard), context));
  model->rope_freq_factors_ = rope_freq_factors;
  TROUPE_RETURN_IF_ERROR(model->set_attention_params());
  TROUPE_RETURN_IF_ERROR(place_llama_shard(model->shard_, model->weights_));
  if (model->hp_.moe.active()) TROUPE_RETURN_IF_ERROR(model->create_moe());
  TROUPE_RETURN_IF_ERROR(model->allocate_activations());
  return std::unique_ptr<Model>(std::move(model));
}

LlamaModel::LlamaModel(LlamaHParams hp, LlamaWeights w, LlamaShard shard, const ModelContext& ctx)
    : hp_(std::move(hp)), w_(std::move(w)), ctx_(ctx), weights_(*ctx.allocator), shard_(std::move(shard)) {
  info_.architecture = hp_.arch;
  info_.vocab_size = hp_.n_vocab;
  info_.context_length = hp_.n_ctx_train;
  info_.num_layers = hp_.n_layer;
  info_.num_heads = hp_.n_head;
  info_.num_kv_heads = hp_.n_head_kv;
  info_.head_dim = hp_.head_dim;
  info_.hidden_size = hp_.n_embd;
  info_.weight_bytes = w_.bytes_per_token;
  info_.sliding_window = hp_.sliding_window;  // every layer's window: the KV cache frees what leaves it
  const std::string ffn = hp_.moe.active() ? std::to_string(hp_.moe.n_expert) + " experts of " +
                                                  std::to_string(hp_.moe.n_ff_exp) + " (top " +
                                                  std::to_string(hp_.moe.n_used) + ", " +
                                                  std::string(to_string(hp_.moe.router.gating)) +
                                                  (hp_.moe.router.normalize ? ", normalized)" : ")")
                                            : std::to_string(hp_.n_ff);
  TROUPE_LOG_INFO("{} model: {} layers, hidden {}, heads {}/{} (kv), head dim {}, ffn {}, vocab {}, rope {} theta {}{}{}, "
                  "{} output{}{}",
                  hp_.arch, hp_.n_layer, hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.head_dim, ffn, hp_.n_vocab,
                  hp_.rope_neox ? "neox" : "normal", hp_.rope_theta,
                  hp_.rope_scaling.active() ? " scaled by " : "", hp_.rope_scaling.description,
                  w_.tied_output ? "tied" : "separate",
                  hp_.sliding_window > 0 ? ", every layer windowed to " + std::to_string(hp_.sliding_window) + " keys"
                                         : std::string(),
                  hp_.swa_window > 0 ? ", alternate layers windowed to " + std::to_string(hp_.swa_window) + " keys"
                                     : std::string());
  for (const std::string* chosen : {&rms_norm_.chosen(), &rope_.chosen(), &silu_and_mul_.chosen()})
    if (*chosen != "native") {
      TROUPE_LOG_INFO("llama model custom ops: rms_norm {}, rotary_embedding {}, silu_and_mul {}", rms_norm_.chosen(),
                      rope_.chosen(), silu_and_mul_.chosen());
      break;
    }
  if (hp_.rope_scaling.active() && rope_.chosen() != "native")
    TROUPE_LOG_WARNING("the rotary_embedding override '{}' is not used: this model's rope scaling ({}) runs the "
                       "platform's named op {}",
                       rope_.chosen(), hp_.rope_scaling.description, named_ops::RopeFreqFactors::name);
  if (shard_.tp_size * shard_.pp_size > 1)
    TROUPE_LOG_INFO("llama model share of tensor rank {}/{}, pipeline stage {}/{}: layers [{}, {}), heads {}/{} (kv), "
                    "ffn rows [{}, {}), vocab rows [{}, {})",
                    shard_.tp_rank, shard_.tp_size, shard_.pp_rank, shard_.pp_size, shard_.layer_begin,
                    shard_.layer_end, shard_.n_head_local, shard_.n_head_kv_local, shard_.ff_begin, shard_.ff_end,
                    shard_.vocab_begin, shard_.vocab_end);
}

Status LlamaModel::set_attention_params() {
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));  // the float the kernels get
  attn_params_.assign(static_cast<size_t>(shard_.layer_end - shard_.layer_begin), AttentionParams(scale));
  for (int l = shard_.layer_begin; l < shard_.layer_end; ++l) {
    AttentionParams& p = attn_params_[static_cast<size_t>(l - shard_.layer_begin)];
    if (hp_.sliding_window > 0) p.set("sliding_window", hp_.sliding_window);
    if (!hp_.swa_layers.empty() && hp_.swa_layers[static_cast<size_t>(l)]) p.set("sliding_window", hp_.swa_window);
    const WeightTensor& sinks = shard_.layers[static_cast<size_t>(l - shard_.layer_begin)].sinks;
    if (sinks.data != nullptr) p.set_array("sinks", static_cast<const float*>(sinks.data), sinks.ne[0]);
    TROUPE_RETURN_IF_ERROR(ctx_.attention->check_params(p));
  }
  return {};
}

Status LlamaModel::create_moe() {
  const bool ep = ctx_.settings != nullptr && ctx_.settings->get_bool("parallel.enable_expert_parallel", false);
  std::vector<MoeLayerWeights> stage;
  for (int l = shard_.layer_begin; l < shard_.layer_end; ++l) stage.push_back(w_.layers[static_cast<size_t>(l)].moe);
  auto split = split_moe(hp_.moe, stage, shard_.tp_rank, shard_.tp_size, ep);
  if (!split.ok()) return split.status();
  std::vector<MoeShardLayer> layers;
  for (const MoeLayerWeights& L : stage) {
    auto share = shard_moe_layer(L, *split, shard_.tp_rank, shard_.tp_size);
    if (!share.ok()) return share.status();
    TROUPE_RETURN_IF_ERROR(place_moe_layer(*share, weights_));
    layers.push_back(std::move(*share));
  }
  if (shard_.tp_size > 1)
    TROUPE_LOG_INFO("{} model experts of tensor rank {}/{}: {} [{}, {}), rows [{}, {}) of each", hp_.arch,
                    shard_.tp_rank, shard_.tp_size, split->expert_parallel ? "expert parallel," : "tensor parallel,",
                    split->expert_begin, split->expert_end, split->ff_begin, split->ff_end);
  auto moe = MoeFfn::create(hp_.moe, *split, std::move(layers), shard_.layer_begin, hp_.n_embd, ctx_);
  if (!moe.ok()) return moe.status();
  moe_ = std::move(*moe);
  return {};
}

Status LlamaModel::allocate_activations() {
  DeviceAllocator& mem = *ctx_.allocator;
  const int64_t T = ctx_.max_num_batched_tokens;
  const int64_t q_dim = int64_t{shard_.n_head_local} * hp_.head_dim;
  const int64_t kv_dim = int64_t{shard_.n_head_kv_local} * hp_.head_dim;
  const int64_t ff = shard_.ff_end - shard_.ff_begin;
  for (auto [array, cols] : {std::pair{&x_, hp_.n_embd}, std::pair{&xn_, hp_.n_embd}, std::pair{&tmp_, hp_.n_embd},
                             std::pair{&q_, q_dim}, std::pair{&k_, kv_dim}, std::pair{&v_, kv_dim},
                             std::pair{&attn_, q_dim}, std::pair{&gate_, ff}, std::pair{&up_, ff}})
    if (cols > 0) TROUPE_RETURN_IF_ERROR(array->allocate(mem, T * cols));  // a MoE model has no dense ff
  if (hp_.qk_norm_full && shard_.tp_size > 1) {
    TROUPE_RETURN_IF_ERROR(gathered_qk_.allocate(mem, T * q_dim * shard_.tp_size));
    TROUPE_RETURN_IF_ERROR(full_qk_.allocate(mem, T * q_dim * shard_.tp_size));
  }
  if (const std::vector<float>& f = hp_.rope_scaling.freq_factors; !f.empty()) {
    TROUPE_RETURN_IF_ERROR(rope_factors_.allocate(mem, static_cast<int64_t>(f.size())));
    TROUPE_RETURN_IF_ERROR(mem.copy(rope_factors_.data(), f.data(), static_cast<int64_t>(f.size() * sizeof(float)),
                                    CopyKind::host_to_device));
  }
  if (weights_.device_bytes() > 0)
    TROUPE_LOG_INFO("llama model: {:.1f} MiB of weights on {}", static_cast<double>(weights_.device_bytes()) / (1 << 20),
                    mem.name());
  return {};
}

KvCacheShape LlamaModel::kv_cache_shape() const {
  return {shard_.layer_end - shard_.layer_begin, shard_.n_head_kv_local, hp_.head_dim};
}

Status LlamaModel::validate(const ForwardBatch& b) const {
  const int64_t T = b.num_tokens();
  const int64_t S = b.num_seqs();
  if (T <= 0) return invalid_argument("forward batch has no tokens");
  if (T > ctx_.max_num_batched_tokens)
    return invalid_argument("forward batch has " + std::to_string(T) + " tokens, more than max_num_batched_tokens " +
                            std::to_string(ctx_.max_num_batched_tokens));
  if (static_cast<int64_t>(b.positions.size()) != T || static_cast<int64_t>(b.slot_mapping.size()) != T)
    return invalid_argument("forward batch: positions and slot_mapping need one entry per token");
  if (S <= 0 || static_cast<int64_t>(b.query_start.size()) != S + 1 ||
      static_cast<int64_t>(b.block_tables.size()) != S)
    return invalid_argument("forward batch: query_start needs num_seqs+1 entries and block_tables num_seqs");
  if (b.query_start.front() != 0 || b.query_start.back() != T)
    return invalid_argument("forward batch: query_start must start at 0 and end at num_tokens");
  for (int64_t s = 0; s < S; ++s) {
    const int32_t q_len = b.query_start[s + 1] - b.query_start[s];
    if (q_len <= 0) return invalid_argument("forward batch: sequence " + std::to_string(s) + " has no tokens");
    if (b.seq_lens[s] < q_len)
      return invalid_argument("forward batch: seq_lens[" + std::to_string(s) + "] is inconsistent");
  }
  for (int64_t t = 0; t < T; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= hp_.n_vocab)
      return out_of_range("token id " + std::to_string(b.token_ids[t]) + " is outside the vocabulary of " +
                          std::to_string(hp_.n_vocab));
    if (b.positions[t] < 0) return invalid_argument("forward batch: negative position");
  }
  for (int32_t r : b.logits_indices)
    if (r < 0 || r >= T) return out_of_range("logits index " + std::to_string(r) + " is outside the batch");
  if (!b.lora_ids.empty()) {
    if (static_cast<int64_t>(b.lora_ids.size()) != S)
      return invalid_argument("forward batch: lora_ids needs one entry per sequence (or none)");
    for (int64_t id : b.lora_ids) {
      if (id == 0) continue;
      if (ctx_.loras == nullptr) return invalid_argument("forward batch names LoRA adapter " + std::to_string(id) +
                                                         ", but LoRA is off (--enable-lora)");
      if (!ctx_.loras->contains(id))
        return not_found("forward batch names LoRA adapter " + std::to_string(id) + ", which is not loaded");
    }
  }
  return {};
}

bool LlamaModel::applies_lora(std::string_view name) const {
  const std::string_view full = name;
  constexpr std::string_view kPrefix = "blk.", kSuffix = ".weight";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  name.remove_prefix(kPrefix.size());
  name.remove_suffix(kSuffix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 6) return false;
  int layer = 0;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
    layer = layer * 10 + (c - '0');
  }
  if (layer >= hp_.n_layer) return false;
  const std::string_view kind = name.substr(dot + 1);
  // Only a projection the file has as a tensor of that name: phi3's fused attn_qkv and
  // ffn_up are bound as views (":q", ":gate"...) that no adapter tensor names.
  const LlamaLayerWeights& L = w_.layers[static_cast<size_t>(layer)];
  const std::pair<std::string_view, const WeightTensor*> kinds[] = {
      {"attn_q", L.wq},       {"attn_k", L.wk},     {"attn_v", L.wv},        {"attn_output", L.wo},
      {"ffn_gate", L.ffn_gate}, {"ffn_up", L.ffn_up}, {"ffn_down", L.ffn_down}};
  for (const auto& [k, t] : kinds)
    if (kind == k) return t != nullptr && t->name == std::string_view(full);
  return false;
}

Status LlamaModel::apply_lora(const ForwardBatch& b, const WeightTensor& w, const float* x, float* y) {
  if (b.lora_ids.empty() || ctx_.loras == nullptr) return {};
  Ops& ops = *ctx_.ops;
  const int64_t in = w.ne[0], out = w.rows();
  const int32_t S = b.num_seqs();
  for (int32_t s = 0; s < S;) {
    const int64_t id = b.lora_ids[static_cast<size_t>(s)];
    int32_t e = s + 1;  // sequences are contiguous rows: one range for a run of equal adapters
    while (e < S && b.lora_ids[static_cast<size_t>(e)] == id) ++e;
    const LoraWeights* lw = id != 0 ? ctx_.loras->find(id, w.name) : nullptr;
    if (lw != nullptr) {
      const int64_t r0 = b.query_start[static_cast<size_t>(s)], n = b.query_start[static_cast<size_t>(e)] - r0;
      TROUPE_RETURN_IF_ERROR(lora_mid_.reserve(*ctx_.allocator, n * lw->rank));
      TROUPE_RETURN_IF_ERROR(lora_out_.reserve(*ctx_.allocator, n * out));
      ops.matmul(lw->a, x + r0 * in, n, lora_mid_.data());
      ops.matmul(lw->b, lora_mid_.data(), n, lora_out_.data());
      ops.add_inplace(y + r0 * out, lora_out_.data(), n * out);
    }
    s = e;
  }
  return {};
}

void LlamaModel::rotate(float* x, const ForwardBatch& b, int n_heads) {
  if (rope_freq_factors_ != nullptr) {
    rope_freq_factors_(*ctx_.ops, x, b.positions.data(), b.num_tokens(), n_heads, hp_.head_dim, hp_.rope_theta,
                       hp_.rope_neox, rope_factors_.empty() ? nullptr : rope_factors_.data(), hp_.rope_scaling.mscale);
    return;
  }
  rope_(*ctx_.ops, x, b.positions.data(), b.num_tokens(), n_heads, hp_.head_dim, hp_.rope_theta, hp_.rope_neox);
}

Status LlamaModel::norm_qk(const LlamaShardLayer& L, int64_t T) {
  Ops& ops = *ctx_.ops;
  const int64_t hd = hp_.head_dim;
  if (!hp_.qk_norm_full) {  // qwen3: an RMS norm over each head's vector
    rms_norm_(ops, q_.data(), static_cast<const float*>(L.q_norm.data), T * shard_.n_head_local, hd, hp_.rms_eps,
              q_.data());
    rms_norm_(ops, k_.data(), static_cast<const float*>(L.k_norm.data), T * shard_.n_head_kv_local, hd, hp_.rms_eps,
              k_.data());
    return {};
  }
  TROUPE_RETURN_IF_ERROR(norm_full_width(q_.data(), static_cast<const float*>(L.q_norm.data), T, shard_.n_head_local * hd));
  return norm_full_width(k_.data(), static_cast<const float*>(L.k_norm.data), T, shard_.n_head_kv_local * hd);
}

// OLMoE norms q and k over the whole projection, every head at once (llama.cpp's olmoe
// graph norms before the reshape to heads). Split over tensor ranks, each rank gathers every
// rank's rows, lays them out as whole rows, norms them, and keeps its own columns again: the
// gather is exact, so every rank norms the very values one rank would (as vLLM's OLMoE does).
Status LlamaModel::norm_full_width(float* x, const float* weight, int64_t T, int64_t width) {
  Ops& ops = *ctx_.ops;
  const int tp = shard_.tp_size;
  if (tp == 1) {
    rms_norm_(ops, x, weight, T, width, hp_.rms_eps, x);
    return {};
  }
  DeviceAllocator& mem = *ctx_.allocator;
  const auto f = static_cast<int64_t>(sizeof(float));
  const int64_t full = width * tp;
  TROUPE_RETURN_IF_ERROR(ctx_.tp_communicator->all_gather(x, gathered_qk_.data(), T * width, DType::f32));
  for (int r = 0; r < tp; ++r)  // rank r's [T][width] block into columns [r*width, (r+1)*width)
    TROUPE_RETURN_IF_ERROR(mem.copy_2d(full_qk_.data() + r * width, full * f, gathered_qk_.data() + r * T * width,
                                       width * f, width * f, T, CopyKind::device_to_device));
  rms_norm_(ops, full_qk_.data(), weight, T, full, hp_.rms_eps, full_qk_.data());
  return mem.copy_2d(x, width * f, full_qk_.data() + shard_.tp_rank * width, full * f, width * f, T,
                     CopyKind::device_to_device);
}

// Stage 0's input: the token embeddings. Vocab-parallel: a rank fills the rows of the tokens
// in its vocabulary slice and zeros the others; the all_reduce adds exactly one non-zero
// row per token, so every rank ends with the exact embeddings.
Status LlamaModel::embed(const ForwardBatch& b) {
  Ops& ops = *ctx_.ops;
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  if (shard_.tp_size == 1) {
    ops.embedding(shard_.token_embd, b.token_ids.data(), T, x_.data());
    return {};
  }
  TROUPE_RETURN_IF_ERROR(ctx_.allocator->fill_zero(x_.data(), T * E * static_cast<int64_t>(sizeof(float))));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = b.token_ids[static_cast<size_t>(t)];
    if (id < shard_.vocab_begin || id >= shard_.vocab_end) continue;
    const auto local = static_cast<int32_t>(id - shard_.vocab_begin);
    ops.embedding(shard_.token_embd, &local, 1, x_.data() + t * E);
  }
  return ctx_.tp_communicator->all_reduce(x_.data(), T * E, DType::f32);
}

// The last stage's output head on the rows whose logits are wanted. Vocab-parallel: each
// tensor rank computes its slice of the vocabulary, tensor rank 0 gathers the slices into
// whole rows. With pipeline stages, the last stage's tensor rank 0 sends the rows to rank 0.
Status LlamaModel::output(const ForwardBatch& b, float* logits) {
  Ops& ops = *ctx_.ops;
  const int64_t E = hp_.n_embd;
  const int64_t V = hp_.n_vocab;
  const int64_t R = static_cast<int64_t>(b.logits_indices.size());
  const bool is_rank0 = shard_.pp_rank == 0 && shard_.tp_rank == 0;
  DeviceAllocator& mem = *ctx_.allocator;
  const auto row = static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < R; ++r)
    TROUPE_RETURN_IF_ERROR(mem.copy(tmp_.data() + r * E, x_.data() + static_cast<int64_t>(b.logits_indices[r]) * E,
                                    E * row, CopyKind::device_to_device));
  rms_norm_(ops, tmp_.data(), static_cast<const float*>(shard_.output_norm.data), R, E, hp_.rms_eps, xn_.data());
  float* rows = nullptr;  // where tensor rank 0 of the last stage puts the whole rows
  if (shard_.tp_rank == 0) {
    if (is_rank0) {
      if (logits == nullptr) return internal_error("the llama model on rank 0 was given no logits buffer");
      rows = logits;
    } else {
      TROUPE_RETURN_IF_ERROR(logits_buf_.reserve(mem, R * V));
      rows = logits_buf_.data();
    }
  }
  if (shard_.tp_size == 1) {
    ops.matmul(shard_.output, xn_.data(), R, rows);
  } else {
    const int64_t vmax = shard_.vocab_max;
    TROUPE_RETURN_IF_ERROR(vocab_part_.reserve(mem, R * vmax));
    if (shard_.tp_rank == 0) TROUPE_RETURN_IF_ERROR(gathered_.reserve(mem, shard_.tp_size * R * vmax));
    ops.matmul(shard_.output, xn_.data(), R, vocab_part_.data());  // [R][own slice], packed
    TROUPE_RETURN_IF_ERROR(
        ctx_.tp_communicator->gather(vocab_part_.data(), gathered_.data(), R * vmax, DType::f32, 0));
    if (shard_.tp_rank == 0) {
      for (int q = 0; q < shard_.tp_size; ++q) {
        const auto [v0, v1] = even_split(V, q, shard_.tp_size);
        const float* part = gathered_.data() + q * R * vmax;
        TROUPE_RETURN_IF_ERROR(
            mem.copy_2d(rows + v0, V * row, part, (v1 - v0) * row, (v1 - v0) * row, R, CopyKind::device_to_device));
      }
    }
  }
  if (shard_.pp_size > 1 && shard_.tp_rank == 0)
    return ctx_.communicator->send(rows, R * V, DType::f32, 0);
  return {};
}

// Stage 0 embeds, later stages receive the residual stream; then this stage's layers.
Status LlamaModel::run_layers(const ForwardBatch& b) {
  Ops& ops = *ctx_.ops;
  AttentionBackend& attn = *ctx_.attention;
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  const int tp = shard_.tp_size;
  // Every rank of a stage holds the same residual stream; the partial sums of the
  // row-parallel matrices (attn_output, ffn_down) are all-reduced over the stage's ranks.
  DeviceCommunicator* group = ctx_.tp_communicator;
  const bool lora = !b.lora_ids.empty() && ctx_.loras != nullptr;
  // LoRA updates gate and up before the activation: the unfused path then.
  const bool fused_silu = silu_and_mul_.chosen() == "native" && !lora;

  if (shard_.first_stage()) {
    TROUPE_RETURN_IF_ERROR(embed(b));
  } else {
    // The previous stage's tensor rank of the same index sends its residual stream.
    TROUPE_RETURN_IF_ERROR(ctx_.communicator->recv(x_.data(), T * E, DType::f32,
                                                   global_rank(shard_.pp_rank - 1, shard_.tp_rank)));
  }
  for (int l = shard_.layer_begin; l < shard_.layer_end; ++l) {
    const int local = l - shard_.layer_begin;  // the KV cache holds this stage's layers only
    const LlamaShardLayer& L = shard_.layers[static_cast<size_t>(local)];
    rms_norm_(ops, x_.data(), static_cast<const float*>(L.attn_norm.data), T, E, hp_.rms_eps, xn_.data());
    // q, k and v read the same input: one pass (gate and up below likewise).
    const WeightTensor* qkv[3] = {&L.wq, &L.wk, &L.wv};
    float* qkv_out[3] = {q_.data(), k_.data(), v_.data()};
    ops.matmul_multi(qkv, qkv_out, 3, xn_.data(), T);
    if (lora)
      for (int j = 0; j < 3; ++j) TROUPE_RETURN_IF_ERROR(apply_lora(b, *qkv[j], xn_.data(), qkv_out[j]));
    const WeightTensor* biases[3] = {&L.bq, &L.bk, &L.bv};
    for (int j = 0; j < 3; ++j)
      if (biases[j]->data != nullptr)
        ops.add_bias(qkv_out[j], static_cast<const float*>(biases[j]->data), T, biases[j]->ne[0]);
    if (L.q_norm.data != nullptr) TROUPE_RETURN_IF_ERROR(norm_qk(L, T));
    rotate(q_.data(), b, shard_.n_head_local);
    rotate(k_.data(), b, shard_.n_head_kv_local);
    attn.forward(local, q_.data(), k_.data(), v_.data(), attn_.data(), shard_.n_head_local, b,
                 attn_params_[static_cast<size_t>(local)]);
    ops.matmul(L.wo, attn_.data(), T, tmp_.data());
    if (lora) TROUPE_RETURN_IF_ERROR(apply_lora(b, L.wo, attn_.data(), tmp_.data()));
    if (L.bo.data != nullptr) ops.add_bias(tmp_.data(), static_cast<const float*>(L.bo.data), T, E);  // tensor rank 0
    if (tp > 1) TROUPE_RETURN_IF_ERROR(group->all_reduce(tmp_.data(), T * E, DType::f32));
    ops.add_inplace(x_.data(), tmp_.data(), T * E);

    rms_norm_(ops, x_.data(), static_cast<const float*>(L.ffn_norm.data), T, E, hp_.rms_eps, xn_.data());
    if (moe_ != nullptr) {
      TROUPE_RETURN_IF_ERROR(moe_->forward(local, xn_.data(), T, tmp_.data()));
    } else if (fused_silu) {
      ops.matmul_silu_mul(L.ffn_gate, L.ffn_up, xn_.data(), T, gate_.data(), up_.data());
    } else {  // silu_and_mul is overridden, or LoRA: the projections, then the activation
      ops.matmul(L.ffn_gate, xn_.data(), T, gate_.data());
      ops.matmul(L.ffn_up, xn_.data(), T, up_.data());
      if (lora) {
        TROUPE_RETURN_IF_ERROR(apply_lora(b, L.ffn_gate, xn_.data(), gate_.data()));
        TROUPE_RETURN_IF_ERROR(apply_lora(b, L.ffn_up, xn_.data(), up_.data()));
      }
      silu_and_mul_(ops, gate_.data(), up_.data(), T * (shard_.ff_end - shard_.ff_begin), gate_.data());
    }
    if (moe_ == nullptr) {
      ops.matmul(L.ffn_down, gate_.data(), T, tmp_.data());
      if (lora) TROUPE_RETURN_IF_ERROR(apply_lora(b, L.ffn_down, gate_.data(), tmp_.data()));
    }
    if (tp > 1) TROUPE_RETURN_IF_ERROR(group->all_reduce(tmp_.data(), T * E, DType::f32));
    ops.add_inplace(x_.data(), tmp_.data(), T * E);
  }
  return {};
}

Status LlamaModel::forward(const ForwardBatch& b, float* logits) {
  TROUPE_RETURN_IF_ERROR(validate(b));
  TROUPE_RETURN_IF_ERROR(run_layers(b));
  const int64_t T = b.num_tokens();
  const int64_t E = hp_.n_embd;
  const int64_t R = static_cast<int64_t>(b.logits_indices.size());
  const int pp = shard_.pp_size;
  if (!shard_.last_stage()) {
    TROUPE_RETURN_IF_ERROR(ctx_.communicator->send(x_.data(), T * E, DType::f32,
                                                   global_rank(shard_.pp_rank + 1, shard_.tp_rank)));
  } else if (R > 0) {
    // Only the rows whose logits are wanted go through the output head.
    TROUPE_RETURN_IF_ERROR(output(b, logits));
  }
  // Rank 0 (stage 0) receives the rows from the last stage's tensor rank 0.
  if (pp > 1 && shard_.pp_rank == 0 && shard_.tp_rank == 0 && R > 0) {
    if (logits == nullptr) return internal_error("the llama model on rank 0 was given no logits buffer");
    return ctx_.communicator->recv(logits, R * hp_.n_vocab, DType::f32, global_rank(pp - 1, 0));
  }
  return {};
}

Status LlamaModel::forward_hidden(const ForwardBatch& b, float* hidden) {
  TROUPE_RETURN_IF_ERROR(validate(b));
  if (shard_.tp_size * shard_.pp_size > 1)
    return not_supported("pooling over a llama model split over ranks is not implemented yet");
  TROUPE_RETURN_IF_ERROR(run_layers(b));
  // The last hidden states are the final norm's output, as the output head sees them.
  rms_norm_(*ctx_.ops, x_.data(), static_cast<const float*>(shard_.output_norm.data), b.num_tokens(), hp_.n_embd,
            hp_.rms_eps, hidden);
  return {};
}

}  // namespace troupe::models
