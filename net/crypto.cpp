#include "net/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstdio>

namespace troupe::crypto {

struct Sha256::Context {
  EVP_MD_CTX* md = nullptr;
  ~Context() { EVP_MD_CTX_free(md); }
};

namespace {

// A digest that cannot be computed is a broken libcrypto, not bad input: nothing sane can
// follow (a prefix cache keyed by garbage would mix requests), so stop loudly.
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "troupe: OpenSSL %s failed\n", what);
  std::abort();
}

}  // namespace

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) die("SHA-256 init");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(ctx_->md, data, size) != 1) die("SHA-256 update");
}

Sha256Digest Sha256::finish() {
  Sha256Digest out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, out.data(), &len) != 1 || len != out.size()) die("SHA-256 final");
  return out;
}

Sha256Digest Sha256::digest(const void* data, size_t size) {
  Sha256Digest out{};
  unsigned int len = 0;
  if (EVP_Digest(data, size, out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size()) die("SHA-256");
  return out;
}

Sha256Digest hmac_sha256(std::string_view key, std::string_view message) {
  Sha256Digest out{};
  unsigned int len = 0;
  static const unsigned char kEmpty = 0;  // HMAC() wants a non-null key even when it is empty
  const auto* k = key.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  if (HMAC(EVP_sha256(), k, static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), out.data(), &len) == nullptr ||
      len != out.size())
    die("HMAC-SHA256");
  return out;
}

Result<std::string> random_bytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    return unavailable("the OS's random number generator gave no random bytes (OpenSSL RAND_bytes failed)");
  return out;
}

Result<std::string> random_hex(size_t n) {
  auto bytes = random_bytes(n);
  if (!bytes.ok()) return bytes.status();
  return to_hex(*bytes);
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string to_hex(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string to_hex(const Sha256Digest& digest) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace troupe::crypto
