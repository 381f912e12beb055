#include "net/tls.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace troupe::net {
namespace {

/// Whether `path` can be opened for reading; else why not.
std::string unreadable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::strerror(errno);
  std::fclose(f);
  return "";
}

/// The private key in `files.key`, used with the certificate already in `ctx`.
Status use_key(SSL_CTX* ctx, const TlsFiles& files, const TlsFileNames& names) {
  std::FILE* f = std::fopen(files.key.c_str(), "rb");
  EVP_PKEY* key = f != nullptr ? PEM_read_PrivateKey(f, nullptr, nullptr, nullptr) : nullptr;
  if (f != nullptr) std::fclose(f);
  if (key == nullptr)
    return invalid_argument(names.key + ": " + files.key + " is not a PEM private key (" + openssl_error() + ")");
  const bool used = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  if (!used)
    return invalid_argument(names.key + ": " + files.key + " is not the key of the certificate " + files.cert + " (" +
                            openssl_error() + ")");
  return {};
}

/// The cluster CA in `files.ca` as the only trust anchor: no system store.
Status use_ca(SSL_CTX* ctx, const TlsFiles& files, const TlsFileNames& names) {
  std::FILE* f = std::fopen(files.ca.c_str(), "rb");
  if (f == nullptr)
    return invalid_argument(names.ca + ": cannot use " + files.ca + " as the cluster CA (" + std::strerror(errno) +
                            ")");
  X509* ca = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (ca == nullptr)
    return invalid_argument(names.ca + ": " + files.ca + " holds no PEM certificate (" + openssl_error() + ")");
  X509_free(ca);
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1)
    return invalid_argument(names.ca + ": cannot use " + files.ca + " as the cluster CA (" + openssl_error() + ")");
  return {};
}

}  // namespace

std::string openssl_error() {
  std::string text;
  const unsigned long e = ERR_get_error();
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    // "error:0A000086:SSL routines::certificate verify failed" -> the reason only.
    const char* reason = ERR_reason_error_string(e);
    text = reason != nullptr ? reason : buf;
  }
  ERR_clear_error();
  return text;
}

Result<std::shared_ptr<const TlsContext>> TlsContext::load(const TlsFiles& files, const TlsFileNames& names) {
  if (!files.any()) return std::shared_ptr<const TlsContext>();
  if (files.cert.empty() || files.key.empty() || files.ca.empty())
    return invalid_argument(names.cert + ", " + names.key + " and " + names.ca + " go together (" + names.together +
                            ")");
  for (const auto& [name, path] : {std::pair{&names.cert, &files.cert}, std::pair{&names.key, &files.key},
                                   std::pair{&names.ca, &files.ca}})
    if (auto why = unreadable(*path); !why.empty()) return not_found(*name + ": cannot read " + *path + ": " + why);
  ERR_clear_error();
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->files_ = files;
  c->ctx_ = SSL_CTX_new(TLS_method());
  if (c->ctx_ == nullptr) return unavailable("TLS: cannot create a context: " + openssl_error());
  SSL_CTX* ctx = c->ctx_;
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1)
    return invalid_argument(names.cert + ": " + files.cert + " is not a PEM certificate (" + openssl_error() + ")");
  TROUPE_RETURN_IF_ERROR(use_key(ctx, files, names));
  TROUPE_RETURN_IF_ERROR(use_ca(ctx, files, names));
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_verify_depth(ctx, 4);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return std::shared_ptr<const TlsContext>(std::move(c));
}

TlsContext::~TlsContext() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

}  // namespace troupe::net
