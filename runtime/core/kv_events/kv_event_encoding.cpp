#include "runtime/core/kv_events/kv_event_encoding.hpp"

// msgpack-cxx without Boost (Debian's libmsgpack-cxx-dev is header-only).
#define MSGPACK_NO_BOOST
#include <msgpack.hpp>

#include <cstring>
#include <variant>

namespace troupe::engine {
namespace {

// vLLM's MEDIUM_GPU: the engine's own KV cache.
constexpr const char* kMedium = "GPU";

struct Buffer {
  std::string bytes;
  void write(const char* data, size_t size) { bytes.append(data, size); }
};
using Packer = msgpack::packer<Buffer>;

// A float64 always (msgspec's encoding of a Python float); msgpack-cxx's pack_double writes
// a whole-valued double as an integer.
void pack_float64(Buffer& out, double d) {
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  char b[9];
  b[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  out.write(b, sizeof b);
}

void pack_str(Packer& p, const std::string& s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_hashes(Packer& p, const std::vector<sched::BlockHash>& hashes) {
  p.pack_array(static_cast<uint32_t>(hashes.size()));
  for (const auto& h : hashes) p.pack_uint64(external_block_hash(h));
}

void pack_stored(Packer& p, const sched::BlockStored& s, const LoraNameFn& lora_name) {
  p.pack_array(12);
  pack_str(p, "BlockStored");
  pack_hashes(p, s.block_hashes);
  if (s.parent_block_hash) p.pack_uint64(external_block_hash(*s.parent_block_hash));
  else p.pack_nil();
  p.pack_array(static_cast<uint32_t>(s.token_ids.size()));
  for (int32_t t : s.token_ids) p.pack_int64(t);
  p.pack_int64(s.block_size);
  if (s.lora_id != 0) p.pack_int64(s.lora_id);
  else p.pack_nil();
  pack_str(p, kMedium);
  const std::string name = s.lora_id != 0 && lora_name ? lora_name(s.lora_id) : std::string();
  if (name.empty()) p.pack_nil();
  else pack_str(p, name);
  p.pack_array(static_cast<uint32_t>(s.block_hashes.size()));  // extra_keys: none per block
  for (size_t i = 0; i < s.block_hashes.size(); ++i) p.pack_nil();
  p.pack_int64(0);  // group_idx
  pack_str(p, s.sliding_window > 0 ? "sliding_window" : "full_attention");
  if (s.sliding_window > 0) p.pack_int64(s.sliding_window);
  else p.pack_nil();
}

}  // namespace

uint64_t external_block_hash(const sched::BlockHash& hash) {
  uint64_t v = 0;
  for (size_t i = hash.bytes.size() - 8; i < hash.bytes.size(); ++i) v = (v << 8) | hash.bytes[i];
  return v;
}

std::string encode_event_batch(double ts, const std::vector<sched::KvEvent>& events, int32_t data_parallel_rank,
                               const LoraNameFn& lora_name) {
  Buffer out;
  Packer p(out);
  p.pack_array(3);
  pack_float64(out, ts);
  p.pack_array(static_cast<uint32_t>(events.size()));
  for (const sched::KvEvent& e : events) {
    if (const auto* s = std::get_if<sched::BlockStored>(&e)) {
      pack_stored(p, *s, lora_name);
    } else if (const auto* r = std::get_if<sched::BlockRemoved>(&e)) {
      p.pack_array(4);
      pack_str(p, "BlockRemoved");
      pack_hashes(p, r->block_hashes);
      pack_str(p, kMedium);
      p.pack_int64(0);  // group_idx
    } else {
      p.pack_array(1);
      pack_str(p, "AllBlocksCleared");
    }
  }
  p.pack_int64(data_parallel_rank);
  return std::move(out.bytes);
}

}  // namespace troupe::engine
