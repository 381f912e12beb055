// The sim accelerator's attention backend: a paged KV cache in the device's
// own memory (f16 or f32, one K and one V array per layer of
// [num_blocks * block_size][num_kv_heads][head_dim]) and causal attention over
// block tables, for prefill chunks and decodes mixed in one batch.
#pragma once

#include <memory>
#include <vector>

#include "sim_device.hpp"
#include "troupe/attention.hpp"
#include "troupe/device_memory.hpp"

namespace sim {

class SimAttentionBackend final : public troupe::AttentionBackend {
 public:
  explicit SimAttentionBackend(SimDevice& device) : d_(device) {}
  std::string name() const override { return "sim_paged"; }
  troupe::Status allocate(const troupe::KvCacheSpec& spec, int64_t num_blocks) override;
  const troupe::KvCacheSpec& spec() const override { return spec_; }
  int64_t num_blocks() const override { return num_blocks_; }
  /// scale, sliding_window and logit_softcap.
  bool implements(std::string_view name) const override;
  void forward(int layer, const float* q, const float* k, const float* v, float* out, int num_heads,
               const troupe::ForwardBatch& batch, const troupe::AttentionParams& params) override;
  using troupe::AttentionBackend::forward;

 private:
  SimDevice& d_;
  troupe::KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  std::unique_ptr<troupe::DeviceBuffer> cache_;  // every layer's K then V, on the device
  std::vector<float> scores_, key_row_;          // kernel scratch
};

}  // namespace sim
