// The CPU attention backend: a paged f32 KV cache in host memory, one K and
// one V array per layer of [num_blocks * block_size][num_kv_heads][head_dim].
#pragma once

#include <memory>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"
#include "troupe/attention.hpp"

namespace troupe::cpu {

class CpuAttentionBackend final : public AttentionBackend {
 public:
  explicit CpuAttentionBackend(kernels::cpu::ThreadPool* pool) : pool_(pool) {}
  std::string name() const override { return "cpu_paged"; }
  Status allocate(const KvCacheSpec& spec, int64_t num_blocks) override;
  void forward(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
               const ForwardBatch& batch, float scale) override;

  const KvCacheSpec& spec() const override { return spec_; }
  int64_t num_blocks() const override { return num_blocks_; }

 private:
  kernels::cpu::ThreadPool* pool_;
  KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  std::unique_ptr<float[]> storage_;  // uninitialised: pages are touched only when used
  std::vector<float*> k_layers_;
  std::vector<float*> v_layers_;
  std::vector<const int32_t*> table_ptrs_;  // per-step scratch, kept to avoid allocations
  std::vector<int64_t> work_offsets_;
};

}  // namespace troupe::cpu
