#include "runtime/rank/models/llama_shard.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "troupe/dtype.hpp"
#include "troupe/quantization.hpp"

namespace troupe::models {

WeightTensor row_slice(const WeightTensor& t, int64_t r0, int64_t r1) {
  WeightTensor v = t;
  const int64_t stride = t.row_stride > 0 ? t.row_stride : row_bytes(t.type, t.ne[0]);
  v.data = static_cast<const uint8_t*>(t.data) + r0 * stride;
  v.ne[1] = r1 - r0;
  v.nbytes = static_cast<uint64_t>(stride * (r1 - r0));
  return v;
}

WeightTensor element_slice(const WeightTensor* t, int64_t e0, int64_t e1) {
  if (t == nullptr) return WeightTensor{};
  WeightTensor v = *t;
  v.data = static_cast<const float*>(t->data) + e0;
  v.ne[0] = e1 - e0;
  v.nbytes = static_cast<uint64_t>(e1 - e0) * sizeof(float);
  return v;
}

Result<WeightTensor> column_slice(const WeightTensor& t, int64_t c0, int64_t c1, int tp_rank, int tp_size) {
  if (c0 == 0 && c1 == t.ne[0]) return t;
  if (const WeightFormat* f = weight_formats::find(t.type); f != nullptr && f->row_header_bytes > 0)
    return not_supported("model tensor '" + t.name + "' cannot be split over tensor parallel size " +
                         std::to_string(tp_size) + " by columns: its format " + f->name +
                         " keeps a header per row (a per-channel scale) that a column slice would lose");
  const DTypeTraits tr = traits(t.type);
  if (c0 % tr.block_elems != 0 || c1 % tr.block_elems != 0)
    return invalid_argument("model tensor '" + t.name + "' cannot be split over tensor parallel size " +
                            std::to_string(tp_size) + ": rank " + std::to_string(tp_rank) + " would read columns [" +
                            std::to_string(c0) + ", " + std::to_string(c1) + ") of its " + std::string(tr.name) +
                            " rows, which are blocks of " + std::to_string(tr.block_elems) + " elements");
  WeightTensor v = t;
  const int64_t full = t.row_stride > 0 ? t.row_stride : row_bytes(t.type, t.ne[0]);
  v.data = static_cast<const uint8_t*>(t.data) + c0 / tr.block_elems * tr.block_bytes;
  v.ne[0] = c1 - c0;
  v.row_stride = full;
  v.nbytes = static_cast<uint64_t>(full * (t.rows() - 1) + row_bytes(t.type, c1 - c0));
  return v;
}

std::pair<int64_t, int64_t> even_split(int64_t n, int part, int parts) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = part * base + std::min<int64_t>(part, extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

Status check_llama_parallel(const LlamaHParams& hp, int tp_size, int pp_size) {
  if (tp_size < 1 || pp_size < 1)
    return invalid_argument("tensor parallel size (" + std::to_string(tp_size) + ") and pipeline parallel size (" +
                            std::to_string(pp_size) + ") must be at least 1.");
  if (hp.n_head % tp_size != 0)
    return invalid_argument("Total number of attention heads (" + std::to_string(hp.n_head) +
                            ") must be divisible by tensor parallel size (" + std::to_string(tp_size) + ").");
  if (hp.n_head_kv % tp_size != 0)
    return invalid_argument("Total number of key-value heads (" + std::to_string(hp.n_head_kv) +
                            ") must be divisible by tensor parallel size (" + std::to_string(tp_size) + ").");
  if (hp.n_layer < pp_size)
    return invalid_argument("Number of layers (" + std::to_string(hp.n_layer) +
                            ") must be at least the pipeline parallel size (" + std::to_string(pp_size) + ").");
  if (hp.n_vocab < tp_size)
    return invalid_argument("Vocabulary size (" + std::to_string(hp.n_vocab) +
                            ") must be at least the tensor parallel size (" + std::to_string(tp_size) + ").");
  return {};
}

Result<LlamaShard> shard_llama_weights(const LlamaHParams& hp, const LlamaWeights& w, int tp_rank, int tp_size,
                                       int pp_rank, int pp_size) {
  TROUPE_RETURN_IF_ERROR(check_llama_parallel(hp, tp_size, pp_size));
  if (tp_rank < 0 || tp_rank >= tp_size || pp_rank < 0 || pp_rank >= pp_size)
    return invalid_argument("rank (tensor " + std::to_string(tp_rank) + ", pipeline " + std::to_string(pp_rank) +
                            ") is outside tensor parallel size " + std::to_string(tp_size) +
                            " x pipeline parallel size " + std::to_string(pp_size));
  LlamaShard s;
  s.tp_rank = tp_rank;
  s.tp_size = tp_size;
  s.pp_rank = pp_rank;
  s.pp_size = pp_size;
  const auto [l0, l1] = even_split(hp.n_layer, pp_rank, pp_size);
  s.layer_begin = static_cast<int>(l0);
  s.layer_end = static_cast<int>(l1);
  s.n_head_local = hp.n_head / tp_size;
  s.n_head_kv_local = hp.n_head_kv / tp_size;
  std::tie(s.vocab_begin, s.vocab_end) = even_split(hp.n_vocab, tp_rank, tp_size);
  s.vocab_max = (hp.n_vocab + tp_size - 1) / tp_size;
  if (s.last_stage()) s.output_norm = *w.output_norm;
  if (s.first_stage()) s.token_embd = row_slice(*w.token_embd, s.vocab_begin, s.vocab_end);
  if (s.last_stage()) s.output = row_slice(*w.output, s.vocab_begin, s.vocab_end);

  const int64_t hd = hp.head_dim;
  const int64_t q0 = tp_rank * s.n_head_local * hd, q1 = q0 + s.n_head_local * hd;
  const int64_t k0 = tp_rank * s.n_head_kv_local * hd, k1 = k0 + s.n_head_kv_local * hd;
  // n_ff is split in whole blocks of the largest block of any ffn_down (block sizes are 1, 32
  // or 256, so the largest is a multiple of the others): every column slice is then aligned,
  // and every layer and every rank splits it the same way.
  int64_t unit = 1;
  for (const LlamaLayerWeights& L : w.layers)
    if (L.ffn_down != nullptr) unit = std::max(unit, traits(L.ffn_down->type).block_elems);
  if (!hp.moe.active() && (hp.n_ff % unit != 0 || hp.n_ff / unit < tp_size))
    return invalid_argument("the feed-forward size " + std::to_string(hp.n_ff) +
                            " cannot be split over tensor parallel size " + std::to_string(tp_size) +
                            " in whole blocks of " + std::to_string(unit) + " (the ffn_down weights' blocks)");
  if (!hp.moe.active()) {  // the experts are split by moe_shard.hpp
    const auto [u0, u1] = even_split(hp.n_ff / unit, tp_rank, tp_size);
    s.ff_begin = u0 * unit;
    s.ff_end = u1 * unit;
  }

  s.layers.reserve(static_cast<size_t>(l1 - l0));
  for (int l = s.layer_begin; l < s.layer_end; ++l) {
    const LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
    LlamaShardLayer S;
    S.attn_norm = *L.attn_norm;
    S.ffn_norm = *L.ffn_norm;
    S.wq = row_slice(*L.wq, q0, q1);
    S.wk = row_slice(*L.wk, k0, k1);
    S.wv = row_slice(*L.wv, k0, k1);
    S.bq = element_slice(L.bq, q0, q1);
    S.bk = element_slice(L.bk, k0, k1);
    S.bv = element_slice(L.bv, k0, k1);
    if (L.q_norm != nullptr) S.q_norm = *L.q_norm;  // olmoe's whole-projection norms: every rank reads all
    if (L.k_norm != nullptr) S.k_norm = *L.k_norm;
    auto wo = column_slice(*L.wo, q0, q1, tp_rank, tp_size);
    if (!wo.ok()) return wo.status();
    S.wo = *wo;
    if (L.bo != nullptr && tp_rank == 0) S.bo = *L.bo;  // added once, before the all_reduce
    S.sinks = element_slice(L.sinks, q0 / hd, q1 / hd);
    if (L.ffn_down != nullptr) {  // dense; the experts are moe_shard.hpp's
      S.ffn_gate = row_slice(*L.ffn_gate, s.ff_begin, s.ff_end);
      S.ffn_up = row_slice(*L.ffn_up, s.ff_begin, s.ff_end);
      auto down = column_slice(*L.ffn_down, s.ff_begin, s.ff_end, tp_rank, tp_size);
      if (!down.ok()) return down.status();
      S.ffn_down = *down;
    }
    s.layers.push_back(std::move(S));
  }
  return s;
}

Status place_llama_shard(LlamaShard& s, DeviceWeights& weights) {
  auto place = [&weights](WeightTensor& t) -> Status {
    if (t.data == nullptr) return {};  // a part this stage does not hold
    auto placed = weights.place(t);
    if (!placed.ok()) return placed.status();
    t = *placed;
    return {};
  };
  for (WeightTensor* t : {&s.token_embd, &s.output, &s.output_norm}) TROUPE_RETURN_IF_ERROR(place(*t));
  for (LlamaShardLayer& L : s.layers)
    for (WeightTensor* t : {&L.attn_norm, &L.ffn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down,
                            &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm, &L.bo})
      TROUPE_RETURN_IF_ERROR(place(*t));
  return {};
}

}  // namespace troupe::models
