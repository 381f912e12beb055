// The TLS configuration of every link between troupe processes (OpenSSL's
// libssl): the link guard's links (head <-> node, the stats port) and the CPU
// platform's collectives between nodes.
//
// A TlsContext holds this process's certificate and key and the cluster CA:
// TLS 1.3 at least, and both sides must present a certificate that chains to
// that CA (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT); no other trust
// store is used; no session tickets or resumption (every link does a full
// handshake with both certificates, and nothing arrives after it that a relay
// would have to handle). A dialing side may also require that the listener's
// certificate names the host it dialed (stream.hpp: Stream::tls).
//
// The files come from the CLI (--tls-cert, --tls-key, --tls-ca) or, in a
// platform plugin, from the variables `troupe node` sets (TROUPE_TLS_*_FILE):
// errors name the file the way it was given (TlsFileNames).
#pragma once

#include <memory>
#include <string>

#include "troupe/status.hpp"

struct ssl_ctx_st;

namespace troupe::net {

/// This process's certificate (chain) and key, and the cluster CA: PEM files.
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

/// How error messages name the three files: the flags (the default) or whatever carries them.
struct TlsFileNames {
  std::string cert = "--tls-cert";
  std::string key = "--tls-key";
  std::string ca = "--tls-ca";
  /// Why the three go together, said when only some are given.
  std::string together = "this process's certificate, its key, and the cluster CA; `troupe certs` makes them";
};

class TlsContext {
 public:
  /// Loads and checks the three files; none given: null. Errors (invalid_argument or
  /// not_found) are one line naming the file as `names` does: some but not all three
  /// given, unreadable, not PEM, a key that does not match the certificate.
  static Result<std::shared_ptr<const TlsContext>> load(const TlsFiles& files, const TlsFileNames& names = {});
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* native() const { return ctx_; }
  const TlsFiles& files() const { return files_; }

 private:
  TlsContext() = default;
  ssl_ctx_st* ctx_ = nullptr;
  TlsFiles files_;
};

/// The first error OpenSSL queued on this thread, its reason only ("certificate verify
/// failed"; "" when none), and the queue emptied.
std::string openssl_error();

}  // namespace troupe::net
