#include "sim_attention.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim_kernels.hpp"
#include "sim_memory.hpp"
#include "troupe/log.hpp"

namespace sim {

troupe::Status SimAttentionBackend::allocate(const troupe::KvCacheSpec& spec, int64_t num_blocks) {
  if (spec.dtype != troupe::DType::f16 && spec.dtype != troupe::DType::f32)
    return troupe::not_supported("the sim_paged attention backend stores the KV cache in f16 or f32, not " +
                                 std::string(troupe::to_string(spec.dtype)));
  if (spec.block_size <= 0 || spec.num_layers <= 0 || spec.num_kv_heads <= 0 || spec.head_dim <= 0)
    return troupe::invalid_argument("invalid KV cache spec (block size, layers, kv heads and head dim must be positive)");
  if (num_blocks <= 0) return troupe::invalid_argument("the KV cache needs at least one block");
  cache_.reset();
  num_blocks_ = 0;
  auto buffer = allocate_on_device(d_, spec.bytes_per_block() * num_blocks);
  if (!buffer.ok())
    return troupe::Status(buffer.status().code(), "KV cache of " + std::to_string(num_blocks) + " blocks: " +
                                                      buffer.status().message());
  cache_ = std::move(*buffer);
  spec_ = spec;
  num_blocks_ = num_blocks;
  TROUPE_LOG_INFO("sim_paged KV cache: {} blocks of {} tokens, {} ({:.1f} MiB of sim memory)", num_blocks,
                  spec.block_size, troupe::to_string(spec.dtype),
                  static_cast<double>(spec.bytes_per_block() * num_blocks) / (1 << 20));
  return {};
}

bool SimAttentionBackend::implements(std::string_view name) const {
  return name == "scale" || name == "sliding_window" || name == "logit_softcap" || name == "sinks";
}

void SimAttentionBackend::forward(int layer, const float* q, const float* k, const float* v, float* out,
                                  int num_heads, const troupe::ForwardBatch& b,
                                  const troupe::AttentionParams& params) {
  const char* op = "paged_attention";
  if (!cache_ || layer < 0 || layer >= spec_.num_layers || num_heads % spec_.num_kv_heads != 0) {
    std::fprintf(stderr, "sim accelerator: paged_attention: layer %d / %d heads do not fit the cache\n", layer,
                 num_heads);
    std::abort();
  }
  const int64_t T = b.num_tokens();
  const int hd = spec_.head_dim;
  const int64_t kv_dim = int64_t{spec_.num_kv_heads} * hd;
  const int64_t layer_bytes = num_blocks_ * spec_.block_size * kv_dim * (spec_.dtype == troupe::DType::f16 ? 2 : 4);
  // Layer l's keys, then its values, in the one cache buffer.
  auto* base = static_cast<uint8_t*>(cache_->data());
  kernels::KvLayer cache;
  cache.k = d_.must_map(base + 2 * layer * layer_bytes, layer_bytes, op);
  cache.v = d_.must_map(base + (2 * layer + 1) * layer_bytes, layer_bytes, op);
  cache.f16 = spec_.dtype == troupe::DType::f16;
  cache.kv_dim = kv_dim;
  kernels::kv_store(cache, dev_f32(d_, k, T * kv_dim, op), dev_f32(d_, v, T * kv_dim, op), b.slot_mapping.data(), T);
  const float* qr = dev_f32(d_, q, T * num_heads * hd, op);
  float* o = dev_f32(d_, out, T * num_heads * hd, op);
  key_row_.resize(static_cast<size_t>(hd));
  const int bs = spec_.block_size;
  for (int s = 0; s < b.num_seqs(); ++s) {
    const auto& table = b.block_tables[static_cast<size_t>(s)];
    scores_.resize(static_cast<size_t>(b.seq_lens[static_cast<size_t>(s)]));
    auto slot_of = [&](int64_t p) { return int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs; };
    kernels::paged_attention_seq(cache, qr, o, b.query_start[static_cast<size_t>(s)],
                                 b.query_start[static_cast<size_t>(s) + 1], b.seq_lens[static_cast<size_t>(s)],
                                 num_heads, spec_.num_kv_heads, hd, static_cast<float>(params.number("scale", 1.0)),
                                 static_cast<int32_t>(params.number("sliding_window")),
                                 static_cast<float>(params.number("logit_softcap")),
                                 params.array("sinks").empty() ? nullptr : params.array("sinks").data(), slot_of,
                                 scores_.data(), key_row_.data());
  }
  maybe_break(op, o, T * num_heads * hd);
}

}  // namespace sim
