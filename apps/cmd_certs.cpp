// `troupe certs --out DIR --hosts NAME_OR_IP,... [--days N] [--force]`: a quick
// start for mutual TLS between troupe processes (net/tls.hpp). Makes a
// self-signed cluster CA (DIR/ca.pem, DIR/ca-key.pem; or reuses the one in DIR)
// and, for every host, DIR/<host>.pem and DIR/<host>-key.pem signed by it, with
// the host as a subject alternative name (an IP address or a DNS name: the
// dialing side checks it) and both server and client use, since every link is
// mutual. Keys are EC P-256, written 0600; existing files are never replaced
// without --force. OpenSSL's EVP and X509 API (libcrypto).
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/command.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {
namespace {

struct Options {
  std::string out;
  std::string hosts;
  int days = 825;
  bool force = false;
};

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : "OpenSSL error " + std::to_string(e);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe certs: error: %s\n", message.c_str());
  return 1;
}

bool is_ip(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

/// A host name (RFC 1123 labels) or an IP literal; else why not.
std::string bad_host(const std::string& host) {
  if (host.empty()) return "an empty host name";
  if (is_ip(host)) return "";
  if (host.size() > 253) return "'" + host + "' is longer than 253 characters";
  for (char c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.')
      return "'" + host + "' is neither an IP address nor a DNS name";
  return "";
}

/// The file name a host's certificate gets ("10.0.0.5", "node-1", "fd00__1" for fd00::1).
std::string file_stem(const std::string& host) {
  std::string s = host;
  for (char& c : s)
    if (c == ':') c = '_';
  return s;
}

Result<KeyPtr> new_key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return unavailable("cannot make an EC P-256 key: " + openssl_error());
  return key;
}

Status add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return invalid_argument("cannot make the extension " + value + ": " + openssl_error());
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return unavailable("cannot add the extension " + value + ": " + openssl_error());
  return {};
}

/// A certificate for `key` named `common_name`, valid from an hour ago for `days`, signed by
/// `issuer_key` (issuer null: self-signed).
Result<CertPtr> make_cert(EVP_PKEY* key, const std::string& common_name, int days, X509* issuer,
                          EVP_PKEY* issuer_key) {
  CertPtr cert(X509_new());
  if (!cert) return unavailable("cannot make a certificate: " + openssl_error());
  X509_set_version(cert.get(), 2);  // v3
  // A random 127-bit serial: unique without bookkeeping.
  {
    BIGNUM* bn = BN_new();
    const bool ok = bn != nullptr && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
                    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr;
    BN_free(bn);
    if (!ok) return unavailable("cannot make a serial number: " + openssl_error());
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("troupe"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (issuer == nullptr) {
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_subject_key_identifier, "hash"));
  } else {
    const std::string san = (is_ip(common_name) ? "IP:" : "DNS:") + common_name;
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_key_usage, "critical,digitalSignature"));
    // Every link is mutual: a node's certificate serves its port and dials its peers.
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_subject_alt_name, san));
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_subject_key_identifier, "hash"));
    TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), signer, NID_authority_key_identifier, "keyid:always"));
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0)
    return unavailable("cannot sign the certificate of " + common_name + ": " + openssl_error());
  return cert;
}

/// Writes `pem` (from `write`) to `path` with `mode`; O_EXCL unless `force`.
template <class Write>
Status write_pem(const std::string& path, mode_t mode, bool force, Write write) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), mode);
  if (fd < 0) return unavailable("cannot write " + path + ": " + std::strerror(errno));
  if (::fchmod(fd, mode) != 0) {  // an existing file (--force) keeps its mode otherwise
    ::close(fd);
    return unavailable("cannot set the mode of " + path + ": " + std::strerror(errno));
  }
  std::FILE* f = ::fdopen(fd, "w");
  if (f == nullptr) {
    ::close(fd);
    return unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  const bool ok = write(f) == 1;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return unavailable("cannot write " + path + ": " + (ok ? std::strerror(errno) : openssl_error()));
  return {};
}

Status write_key(const std::string& path, EVP_PKEY* key, bool force) {
  return write_pem(path, 0600, force, [&](std::FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

Status write_cert(const std::string& path, X509* cert, bool force) {
  return write_pem(path, 0644, force, [&](std::FILE* f) { return PEM_write_X509(f, cert); });
}

int run_certs(const Options& o) {
  namespace fs = std::filesystem;
  if (o.out.empty()) return fail("--out DIR is required");
  if (o.days < 1 || o.days > 36500) return fail("--days must be in 1..36500");
  std::vector<std::string> hosts;
  {
    std::stringstream ss(o.hosts);
    for (std::string h; std::getline(ss, h, ',');) {
      if (auto why = bad_host(h); !why.empty()) return fail("--hosts: " + why);
      if (h == "ca") return fail("--hosts: a host named 'ca' would share its files with the CA's");
      hosts.push_back(h);
    }
  }
  if (hosts.empty()) return fail("--hosts NAME_OR_IP[,NAME_OR_IP...] is required: the hosts of the head and nodes");
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return fail("cannot create " + o.out + ": " + ec.message());
  const std::string ca_cert_path = o.out + "/ca.pem", ca_key_path = o.out + "/ca-key.pem";
  // Nothing is replaced without --force: check every file before writing one.
  const bool reuse_ca = !o.force && fs::exists(ca_cert_path) && fs::exists(ca_key_path);
  std::vector<std::string> targets;
  if (!reuse_ca) targets = {ca_cert_path, ca_key_path};
  for (const auto& h : hosts) {
    targets.push_back(o.out + "/" + file_stem(h) + ".pem");
    targets.push_back(o.out + "/" + file_stem(h) + "-key.pem");
  }
  if (!o.force)
    for (const auto& t : targets)
      if (fs::exists(t)) return fail(t + " exists already; --force replaces it (and the CA with it)");

  KeyPtr ca_key;
  CertPtr ca_cert;
  if (reuse_ca) {
    std::FILE* f = std::fopen(ca_cert_path.c_str(), "r");
    if (f != nullptr) ca_cert.reset(PEM_read_X509(f, nullptr, nullptr, nullptr)), std::fclose(f);
    f = std::fopen(ca_key_path.c_str(), "r");
    if (f != nullptr) ca_key.reset(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr)), std::fclose(f);
    if (!ca_cert) return fail("cannot read the CA certificate " + ca_cert_path + ": " + openssl_error());
    if (!ca_key) return fail("cannot read the CA key " + ca_key_path + ": " + openssl_error());
    if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1)
      return fail(ca_key_path + " is not the key of " + ca_cert_path);
    std::printf("Signing with the existing cluster CA %s\n", ca_cert_path.c_str());
  } else {
    auto key = new_key();
    if (!key.ok()) return fail(key.status().message());
    ca_key = std::move(*key);
    auto cert = make_cert(ca_key.get(), "troupe cluster CA", 3650, nullptr, nullptr);
    if (!cert.ok()) return fail(cert.status().message());
    ca_cert = std::move(*cert);
    if (Status s = write_key(ca_key_path, ca_key.get(), o.force); !s.ok()) return fail(s.message());
    if (Status s = write_cert(ca_cert_path, ca_cert.get(), o.force); !s.ok()) return fail(s.message());
    std::printf("Cluster CA: %s (its key %s: keep it off the nodes)\n", ca_cert_path.c_str(), ca_key_path.c_str());
  }
  for (const auto& h : hosts) {
    auto key = new_key();
    if (!key.ok()) return fail(key.status().message());
    auto cert = make_cert(key->get(), h, o.days, ca_cert.get(), ca_key.get());
    if (!cert.ok()) return fail(cert.status().message());
    const std::string stem = o.out + "/" + file_stem(h);
    if (Status s = write_key(stem + "-key.pem", key->get(), o.force); !s.ok()) return fail(s.message());
    if (Status s = write_cert(stem + ".pem", cert->get(), o.force); !s.ok()) return fail(s.message());
    std::printf("%s: --tls-cert %s.pem --tls-key %s-key.pem --tls-ca %s\n", h.c_str(), stem.c_str(), stem.c_str(),
                ca_cert_path.c_str());
  }
  return 0;
}

const CommandRegistration kRegistration(
    "certs", "Make a cluster CA and a TLS certificate per host for mutual TLS between troupe processes",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("--out", o->out, "Directory for ca.pem, ca-key.pem and HOST.pem, HOST-key.pem (created)");
      sub.add_option("--hosts", o->hosts,
                     "Comma-separated hosts (IP addresses or DNS names, as the head dials them) of the head and "
                     "every node; each gets a certificate with it as subject alternative name");
      sub.add_option("--days", o->days, "Validity of the host certificates in days (default 825; the CA: 3650)");
      sub.add_flag("--force", o->force, "Replace existing files, the CA included");
      return [o]() { return run_certs(*o); };
    });

}  // namespace
}  // namespace troupe::apps
