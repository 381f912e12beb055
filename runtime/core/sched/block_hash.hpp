// Chained block hashes for the prefix cache (vLLM's kv_cache_utils idea):
// hash(block i) = SHA-256(hash(block i-1) || token ids of block i || extra
// keys), where the extra keys (the request's cache salt and LoRA adapter id)
// enter only block 0.
// Chaining makes a block's hash name its whole prefix, so equal hashes mean
// equal KV content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/crypto.hpp"

namespace troupe::sched {

struct BlockHash {
  crypto::Sha256Digest bytes{};
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    // The digest is uniformly distributed: its first 8 bytes are a fine bucket key.
    size_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | h.bytes[i];
    return v;
  }
};

/// The hash of one full block. `parent` is the previous block's hash (none for
/// block 0); `extra_key` (the cache salt) is mixed in only when given, and the LoRA
/// adapter id only when it is not 0 (vLLM: blocks of different adapters never match).
BlockHash hash_block_tokens(const std::optional<BlockHash>& parent,
                            std::span<const int32_t> block_tokens,
                            std::optional<std::string_view> extra_key, int64_t lora_id = 0);

/// Extends `hashes` so it covers every full block of `tokens` (hashes already
/// present are kept: they cover an unchanged prefix). The salt and the LoRA id enter block 0.
void extend_block_hashes(std::vector<BlockHash>& hashes, std::span<const int32_t> tokens,
                         int block_size, const std::optional<std::string>& cache_salt, int64_t lora_id = 0);

}  // namespace troupe::sched
