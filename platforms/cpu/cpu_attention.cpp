#include "platforms/cpu/cpu_attention.hpp"

#include <sys/mman.h>

#include <new>
#include <span>
#include <string>

#include "kernels/cpu/paged_attention.hpp"
#include "troupe/check.hpp"
#include "troupe/log.hpp"

namespace troupe::cpu {

Result<DType> cpu_kv_cache_dtype(const std::string& d) {
  if (d == "auto" || d == "fp16" || d == "float16" || d == "f16" || d == "half") return DType::f16;
  if (d == "fp32" || d == "float32" || d == "f32" || d == "float") return DType::f32;
  return invalid_argument("KV cache dtype '" + d + "' is not supported by platform cpu (choose auto, fp16 or fp32)");
}

void KvPagesRelease::operator()(uint8_t* p) const {
  if (p != nullptr) munmap(p, bytes);
}

Status CpuAttentionBackend::allocate(const KvCacheSpec& spec, int64_t num_blocks) {
  if (spec.dtype != DType::f32 && spec.dtype != DType::f16)
    return not_supported("the cpu_paged attention backend stores the KV cache in f16 or f32, not " +
                         std::string(to_string(spec.dtype)));
  if (spec.block_size <= 0 || spec.num_layers <= 0 || spec.num_kv_heads <= 0 || spec.head_dim <= 0 ||
      spec.head_dim > 256)
    return invalid_argument("invalid KV cache spec (block size, layers, kv heads and head dim must be positive)");
  if (num_blocks <= 0) return invalid_argument("the KV cache needs at least one block");
  const int64_t elem = spec.dtype == DType::f16 ? 2 : 4;
  const int64_t per_layer = num_blocks * spec.block_size * spec.num_kv_heads * spec.head_dim * elem;  // bytes
  storage_.reset();
  const size_t total = static_cast<size_t>(per_layer) * 2 * spec.num_layers;
  void* pages = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages != MAP_FAILED) storage_ = std::unique_ptr<uint8_t, KvPagesRelease>(static_cast<uint8_t*>(pages), {total});
  if (!storage_)
    return resource_exhausted("cannot allocate a KV cache of " + std::to_string(num_blocks) + " blocks (" +
                              std::to_string(spec.bytes_per_block() * num_blocks) + " bytes)");
  spec_ = spec;
  num_blocks_ = num_blocks;
  k_layers_.resize(spec.num_layers);
  v_layers_.resize(spec.num_layers);
  for (int l = 0; l < spec.num_layers; ++l) {
    k_layers_[l] = storage_.get() + (2 * l) * per_layer;
    v_layers_[l] = storage_.get() + (2 * l + 1) * per_layer;
  }
  TROUPE_LOG_INFO("cpu_paged KV cache: {} blocks of {} tokens, {} ({:.1f} MiB)", num_blocks, spec.block_size,
                  to_string(spec.dtype), static_cast<double>(spec.bytes_per_block() * num_blocks) / (1 << 20));
  return {};
}

bool CpuAttentionBackend::implements(std::string_view name) const {
  return name == "scale" || name == "sliding_window" || name == "logit_softcap" || name == "sinks";
}

void CpuAttentionBackend::forward(int layer, const float* q, const float* k, const float* v, float* out,
                                  int num_heads, const ForwardBatch& b, const AttentionParams& params) {
  TROUPE_CHECK(layer >= 0 && layer < spec_.num_layers, "attention layer out of range (cache not allocated?)");
  const auto dtype = spec_.dtype == DType::f16 ? kernels::cpu::KvDtype::f16 : kernels::cpu::KvDtype::f32;
  kernels::cpu::paged_kv_store(dtype, k_layers_[layer], v_layers_[layer], k, v, b.slot_mapping.data(), b.num_tokens(),
                               spec_.num_kv_heads, spec_.head_dim, spec_.block_size);
  const int S = b.num_seqs();
  table_ptrs_.resize(S);
  for (int s = 0; s < S; ++s) table_ptrs_[s] = b.block_tables[s].data();
  work_offsets_.resize(S + 1);
  kernels::cpu::PagedAttentionArgs a;
  a.q = q;
  a.out = out;
  a.kv_dtype = dtype;
  a.k_cache = k_layers_[layer];
  a.v_cache = v_layers_[layer];
  a.query_start = b.query_start.data();
  a.seq_lens = b.seq_lens.data();
  a.block_tables = table_ptrs_.data();
  a.num_seqs = S;
  a.num_heads = num_heads;
  a.num_kv_heads = spec_.num_kv_heads;
  a.head_dim = spec_.head_dim;
  a.block_size = spec_.block_size;
  a.scale = static_cast<float>(params.number("scale", 1.0));
  a.window = static_cast<int32_t>(params.number("sliding_window"));
  a.softcap = static_cast<float>(params.number("logit_softcap"));
  const std::span<const float> sinks = params.array("sinks");  // one per head of this rank
  TROUPE_CHECK(sinks.empty() || static_cast<int>(sinks.size()) == num_heads, "attention sinks: one per head");
  a.sinks = sinks.empty() ? nullptr : sinks.data();
  a.work_offsets = work_offsets_.data();
  kernels::cpu::paged_attention(a, pool_);
}

}  // namespace troupe::cpu
