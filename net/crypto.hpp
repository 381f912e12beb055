// The cryptography troupe needs, from OpenSSL's libcrypto (a maintained
// library, already on every machine through CAF's openssl module), behind a
// plain C++ interface so callers never include OpenSSL:
//   - SHA-256, for prefix-cache block hashes (a collision would hand one
//     request another's KV content);
//   - HMAC-SHA256, for the gates' challenge-response on the cluster secret;
//   - random bytes from the OS's CSPRNG (RAND_bytes), for nonces;
//   - comparison in constant time (CRYPTO_memcmp), for proofs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "troupe/status.hpp"

namespace troupe::crypto {

using Sha256Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  /// The digest of everything fed so far; the object must not be updated after.
  Sha256Digest finish();

  /// One-shot helpers.
  static Sha256Digest digest(const void* data, size_t size);
  static Sha256Digest digest(std::string_view text) { return digest(text.data(), text.size()); }

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
Sha256Digest hmac_sha256(std::string_view key, std::string_view message);

/// `n` bytes from the OS's CSPRNG; unavailable when it cannot supply them.
Result<std::string> random_bytes(size_t n);
/// Lower-case hex of `n` random bytes (2n characters).
Result<std::string> random_hex(size_t n);

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
bool equal_constant_time(std::string_view a, std::string_view b);

/// Lower-case hex.
std::string to_hex(std::string_view bytes);
std::string to_hex(const Sha256Digest& digest);

}  // namespace troupe::crypto
