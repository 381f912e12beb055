#include "troupe/attention.hpp"

#include <string>

namespace troupe {

AttentionParams& AttentionParams::set(std::string_view name, double value) {
  Entry& e = slot(name);
  e.number = value;
  e.values = nullptr;
  e.count = 0;
  return *this;
}

AttentionParams& AttentionParams::set_array(std::string_view name, const float* values, int64_t count) {
  Entry& e = slot(name);
  e.number = 0.0;
  e.values = values;
  e.count = values != nullptr && count > 0 ? count : 0;
  return *this;
}

double AttentionParams::number(std::string_view name, double fallback) const {
  const Entry* e = find(name);
  return e != nullptr && e->values == nullptr ? e->number : fallback;
}

std::span<const float> AttentionParams::array(std::string_view name) const {
  const Entry* e = find(name);
  if (e == nullptr || e->values == nullptr) return {};
  return {e->values, static_cast<size_t>(e->count)};
}

std::vector<std::string> AttentionParams::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back(e.name);
  return out;
}

const AttentionParams::Entry* AttentionParams::find(std::string_view name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

AttentionParams::Entry& AttentionParams::slot(std::string_view name) {
  for (Entry& e : entries_)
    if (e.name == name) return e;
  entries_.push_back(Entry{std::string(name)});
  return entries_.back();
}

bool AttentionBackend::implements(std::string_view name) const { return name == "scale"; }

Status AttentionBackend::check_params(const AttentionParams& params) const {
  for (const std::string& n : params.names())
    if (!implements(n))
      return not_supported("attention backend " + name() + " does not implement the attention parameter '" + n +
                           "' this model needs");
  return {};
}

Status AttentionBackend::check_batch(const ForwardBatch& b) const {
  const int64_t blocks = num_blocks();
  const KvCacheSpec& s = spec();
  if (blocks <= 0 || s.block_size <= 0)
    return unavailable("the KV cache of attention backend " + name() + " is not allocated (initialize_cache first)");
  const int64_t num_slots = blocks * s.block_size;
  if (b.slot_mapping.size() != b.token_ids.size())
    return invalid_argument("forward batch: slot_mapping needs one entry per token");
  for (int64_t slot : b.slot_mapping)
    if (slot < 0 || slot >= num_slots)
      return out_of_range("KV slot " + std::to_string(slot) + " is outside the cache of " + std::to_string(num_slots) +
                          " slots");
  if (b.block_tables.size() != b.seq_lens.size())
    return invalid_argument("forward batch: block_tables needs one entry per sequence");
  for (size_t i = 0; i < b.seq_lens.size(); ++i) {
    const auto& table = b.block_tables[i];
    if (b.seq_lens[i] < 0)
      return invalid_argument("forward batch: sequence " + std::to_string(i) + " has a negative seq_len");
    const int64_t need = (int64_t{b.seq_lens[i]} + s.block_size - 1) / s.block_size;
    if (static_cast<int64_t>(table.size()) < need)
      return invalid_argument("forward batch: the block table of sequence " + std::to_string(i) + " has " +
                              std::to_string(table.size()) + " blocks, seq_len " + std::to_string(b.seq_lens[i]) +
                              " needs " + std::to_string(need));
    for (int32_t blk : table)
      if (blk < 0 || blk >= blocks)
        return out_of_range("KV block " + std::to_string(blk) + " is outside the cache of " + std::to_string(blocks) +
                            " blocks");
  }
  return {};
}

}  // namespace troupe
