#include "troupe/model_runner/lora_adapter_set.hpp"

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>

namespace troupe {
namespace {

std::string shape(const WeightTensor& t) {
  std::string s = "[";
  for (int d = 0; d < std::max(1, t.n_dims); ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

bool is_f32_matrix(const WeightTensor& t) {
  return t.type == DType::f32 && t.n_dims == 2 && t.data != nullptr && t.row_stride == 0 &&
         t.nbytes == static_cast<uint64_t>(t.ne[0] * t.ne[1]) * sizeof(float);
}

// A packed f32 copy of `rows` x `cols` host floats (times `scale`) in device memory.
Result<WeightTensor> place(const std::string& name, const float* host, int64_t cols, int64_t rows, float scale,
                           DeviceAllocator& allocator, std::vector<std::unique_ptr<DeviceBuffer>>& buffers) {
  const int64_t n = cols * rows;
  std::vector<float> scaled;
  if (scale != 1.0f) {
    scaled.assign(host, host + n);
    for (float& v : scaled) v *= scale;
    host = scaled.data();
  }
  const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
  auto buffer = allocator.allocate(bytes);
  if (!buffer.ok()) return buffer.status();
  TROUPE_RETURN_IF_ERROR(allocator.copy((*buffer)->data(), host, bytes, CopyKind::host_to_device));
  WeightTensor t;
  t.name = name;
  t.type = DType::f32;
  t.n_dims = 2;
  t.ne[0] = cols;
  t.ne[1] = rows;
  t.data = (*buffer)->data();
  t.nbytes = static_cast<uint64_t>(bytes);
  buffers.push_back(std::move(*buffer));
  return t;
}

}  // namespace

Status LoraAdapterSet::add(int64_t id, const LoraAdapterSpec& spec, const ModelSource& base, const Model& model,
                           DeviceAllocator& allocator, int64_t max_rank) {
  if (id <= 0) return invalid_argument("a LoRA adapter id must be positive, got " + std::to_string(id));
  if (adapters_.contains(id)) return invalid_argument("LoRA adapter id " + std::to_string(id) + " is already loaded");
  const std::string file = "LoRA adapter " + spec.path + ": ";
  if (spec.targets.empty()) return invalid_argument(file + "it has no lora_a/lora_b tensor pairs");
  if (!std::isfinite(spec.alpha)) return invalid_argument(file + "adapter.lora.alpha is not a finite number");
  std::set<std::string> seen;
  for (const LoraTargetSpec& t : spec.targets) {
    const std::string& name = t.base_name;
    if (!seen.insert(name).second) return invalid_argument(file + "tensor " + name + " is targeted twice");
    const WeightTensor* w = base.tensor(name);
    if (w == nullptr)
      return invalid_argument(file + "tensor " + name + ".lora_a names " + name +
                              ", which the base model does not have");
    if (!model.applies_lora(name))
      return invalid_argument(file + "tensor " + name + ".lora_a targets " + name + ", but the " +
                              model.info().architecture + " model does not apply LoRA to it");
    if (!is_f32_matrix(t.a) || !is_f32_matrix(t.b))
      return invalid_argument(file + "tensors of " + name + " must be 2-D f32 matrices as read");
    const int64_t in = w->ne[0], out = w->rows(), rank = t.a.ne[1];
    if (t.b.ne[0] != rank)
      return invalid_argument(file + "the rank of " + name + ".lora_a " + shape(t.a) + " and " + name + ".lora_b " +
                              shape(t.b) + " differ (lora_a is {in, rank}, lora_b {rank, out})");
    if (t.a.ne[0] != in || t.b.ne[1] != out)
      return invalid_argument(file + "shape mismatch: " + name + " is " + shape(*w) + " (in, out) but " + name +
                              ".lora_a is " + shape(t.a) + " and " + name + ".lora_b " + shape(t.b) +
                              " (expected [" + std::to_string(in) + ", rank] and [rank, " + std::to_string(out) + "])");
    if (rank < 1 || rank > max_rank)
      return invalid_argument(file + "rank " + std::to_string(rank) + " of " + name +
                              " is larger than --max-lora-rank " + std::to_string(max_rank));
  }
  Adapter adapter;
  for (const LoraTargetSpec& t : spec.targets) {
    const int64_t rank = t.a.ne[1];
    const float scale = spec.alpha != 0 ? spec.alpha / static_cast<float>(rank) : 1.0f;  // llama.cpp's rule
    LoraWeights lw;
    lw.rank = rank;
    auto a = place(t.base_name + ".lora_a", static_cast<const float*>(t.a.data), t.a.ne[0], rank, 1.0f, allocator,
                   adapter.buffers);
    if (!a.ok()) return a.status();
    auto b = place(t.base_name + ".lora_b", static_cast<const float*>(t.b.data), rank, t.b.ne[1], scale, allocator,
                   adapter.buffers);
    if (!b.ok()) return b.status();
    lw.a = std::move(*a);
    lw.b = std::move(*b);
    adapter.bytes += static_cast<int64_t>(lw.a.nbytes + lw.b.nbytes);
    adapter.targets.emplace(t.base_name, std::move(lw));
  }
  adapters_.emplace(id, std::move(adapter));
  return {};
}

Status LoraAdapterSet::remove(int64_t id) {
  if (adapters_.erase(id) == 0) return not_found("LoRA adapter id " + std::to_string(id) + " is not loaded");
  return {};
}

Status LoraAdapterSet::pin(int64_t id) {
  auto it = adapters_.find(id);
  if (it == adapters_.end()) return not_found("LoRA adapter id " + std::to_string(id) + " is not loaded");
  it->second.pinned = true;
  return {};
}

bool LoraAdapterSet::pinned(int64_t id) const {
  auto it = adapters_.find(id);
  return it != adapters_.end() && it->second.pinned;
}

std::vector<int64_t> LoraAdapterSet::ids() const {
  std::vector<int64_t> out;
  for (const auto& [id, a] : adapters_) out.push_back(id);
  return out;
}

const LoraWeights* LoraAdapterSet::find(int64_t id, const std::string& base_name) const {
  auto it = adapters_.find(id);
  if (it == adapters_.end()) return nullptr;
  auto t = it->second.targets.find(base_name);
  return t == it->second.targets.end() ? nullptr : &t->second;
}

int64_t LoraAdapterSet::device_bytes() const {
  int64_t n = 0;
  for (const auto& [id, a] : adapters_) n += a.bytes;
  return n;
}

}  // namespace troupe
