// vLLM's wire format for KV cache events (vllm/distributed/kv_events.py), byte for byte
// as msgspec encodes vLLM's structs in their array form (array_like=True; the events also
// tag=True; omit_defaults does not shorten an array, so every field is written). An
// EventBatch is [ts, events, data_parallel_rank] and each event an array that starts with
// its class name, with the fields of the last vLLM release that encoded events as arrays:
//   ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
//    lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]
//   ["BlockRemoved", block_hashes, medium, group_idx]
//   ["AllBlocksCleared"]
// Older consumers read the leading fields and ignore the rest, as msgspec does. A block
// hash is vLLM's default external form (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1): the last 8
// bytes of troupe's SHA-256 block hash as a big-endian unsigned integer. medium is "GPU"
// (vLLM's name for the engine's own KV cache, whatever the device), group_idx 0 (one KV
// cache group), kv_cache_spec_kind "full_attention" or "sliding_window" with its window,
// extra_keys None per block (troupe's salt and LoRA id are inside its hashes).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/sched/kv_events.hpp"

namespace troupe::engine {

/// vLLM's external form of a block hash: the digest's last 8 bytes, big-endian.
uint64_t external_block_hash(const sched::BlockHash& hash);

/// A LoRA adapter's name by id ("" when unknown: encoded as None).
using LoraNameFn = std::function<std::string(int64_t)>;

/// The msgpack bytes of one EventBatch.
std::string encode_event_batch(double ts, const std::vector<sched::KvEvent>& events, int32_t data_parallel_rank,
                               const LoraNameFn& lora_name = {});

}  // namespace troupe::engine
