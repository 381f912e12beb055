// The CPU attention backend: a paged KV cache in host memory, f16 (the default)
// or f32, one K and one V array per layer of
// [num_blocks * block_size][num_kv_heads][head_dim].
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"
#include "troupe/attention.hpp"

namespace troupe::cpu {

/// The cache dtype a config's cache_dtype names: "auto" (f16), "fp16"/"float16"/"f16"/"half",
/// "fp32"/"float32"/"f32"/"float"; anything else is invalid_argument listing the choices.
Result<DType> cpu_kv_cache_dtype(const std::string& cache_dtype);

/// Gives anonymous pages (mmap) back to the kernel (the KV cache's storage).
struct KvPagesRelease {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};

class CpuAttentionBackend final : public AttentionBackend {
 public:
  explicit CpuAttentionBackend(kernels::cpu::ThreadPool* pool) : pool_(pool) {}
  std::string name() const override { return "cpu_paged"; }
  Status allocate(const KvCacheSpec& spec, int64_t num_blocks) override;
  /// scale, sliding_window and logit_softcap.
  bool implements(std::string_view name) const override;
  void forward(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
               const ForwardBatch& batch, const AttentionParams& params) override;
  using AttentionBackend::forward;

  const KvCacheSpec& spec() const override { return spec_; }
  int64_t num_blocks() const override { return num_blocks_; }

 private:
  kernels::cpu::ThreadPool* pool_;
  KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  // Anonymous pages of their own (mmap), untouched until used and given back to the
  // kernel when released: a pool from malloc below glibc's 32 MiB mmap ceiling is kept
  // in the heap after the first large free, and a TP world rebuilt after a lost peer
  // then held one more pool each time (issue 48's chaos run).
  std::unique_ptr<uint8_t, KvPagesRelease> storage_;
  std::vector<void*> k_layers_;
  std::vector<void*> v_layers_;
  std::vector<const int32_t*> table_ptrs_;  // per-step scratch, kept to avoid allocations
  std::vector<int64_t> work_offsets_;
};

}  // namespace troupe::cpu
