#include "runtime/core/sched/block_hash.hpp"

#include "troupe/check.hpp"

namespace troupe::sched {

BlockHash hash_block_tokens(const std::optional<BlockHash>& parent,
                            std::span<const int32_t> block_tokens,
                            std::optional<std::string_view> extra_key, int64_t lora_id) {
  crypto::Sha256 h;
  // Every field is length- or tag-prefixed so no two inputs serialize alike.
  const uint8_t has_parent = parent ? 1 : 0;
  h.update(&has_parent, 1);
  if (parent) h.update(parent->bytes.data(), parent->bytes.size());
  const uint64_t n = block_tokens.size();
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(n >> (8 * i));
  h.update(le, 8);
  for (int32_t t : block_tokens) {
    const auto u = static_cast<uint32_t>(t);
    const uint8_t b[4] = {static_cast<uint8_t>(u), static_cast<uint8_t>(u >> 8),
                          static_cast<uint8_t>(u >> 16), static_cast<uint8_t>(u >> 24)};
    h.update(b, 4);
  }
  const uint8_t has_extra = extra_key ? 1 : 0;
  h.update(&has_extra, 1);
  if (extra_key) {
    const uint64_t len = extra_key->size();
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(len >> (8 * i));
    h.update(le, 8);
    h.update(*extra_key);
  }
  if (lora_id != 0) {  // absent for the base model: its hashes stay what they were
    const uint8_t tag = 2;
    h.update(&tag, 1);
    const auto id = static_cast<uint64_t>(lora_id);
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(id >> (8 * i));
    h.update(le, 8);
  }
  return BlockHash{h.finish()};
}

void extend_block_hashes(std::vector<BlockHash>& hashes, std::span<const int32_t> tokens,
                         int block_size, const std::optional<std::string>& cache_salt, int64_t lora_id) {
  TROUPE_CHECK(block_size > 0, "block size must be positive");
  const size_t num_full = tokens.size() / static_cast<size_t>(block_size);
  for (size_t i = hashes.size(); i < num_full; ++i) {
    std::optional<BlockHash> parent;
    if (i > 0) parent = hashes[i - 1];
    std::optional<std::string_view> extra;
    if (i == 0 && cache_salt) extra = *cache_salt;
    hashes.push_back(
        hash_block_tokens(parent, tokens.subspan(i * block_size, block_size), extra, i == 0 ? lora_id : 0));
  }
}

}  // namespace troupe::sched
