// SHA-256 (FIPS 180-4), written here so block hashes need no crypto library.
// Used for prefix-cache block hashes, where a collision would silently hand
// one request another request's KV content.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::sched {

using Sha256Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  /// The digest of everything fed so far; the object must not be updated after.
  Sha256Digest finish();

  /// One-shot helpers.
  static Sha256Digest digest(const void* data, size_t size);
  static Sha256Digest digest(std::string_view text) { return digest(text.data(), text.size()); }

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;        // bytes waiting in buffer_
  uint64_t total_bytes_ = 0;   // message length so far
  bool finished_ = false;
};

/// Lower-case hex of a digest (logs, tests).
std::string to_hex(const Sha256Digest& digest);

/// HMAC-SHA256 (RFC 2104) of `message` under `key`: the proof a peer gives
/// that it knows a shared secret without sending it (actors/gate_actor).
Sha256Digest hmac_sha256(std::string_view key, std::string_view message);

}  // namespace troupe::sched
