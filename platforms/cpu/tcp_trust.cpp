#include "platforms/cpu/tcp_trust.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

namespace troupe::cpu::tcp {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

Result<std::shared_ptr<const net::TlsContext>> load_from_env() {
  const net::TlsFiles files{env("TROUPE_TLS_CERT_FILE"), env("TROUPE_TLS_KEY_FILE"), env("TROUPE_TLS_CA_FILE")};
  net::TlsFileNames names;
  names.cert = "TROUPE_TLS_CERT_FILE";
  names.key = "TROUPE_TLS_KEY_FILE";
  names.ca = "TROUPE_TLS_CA_FILE";
  names.together = "troupe node --tls-cert, --tls-key, --tls-ca sets them";
  // A file that cannot be read is told as the communicator always has: it "cannot use" it.
  if (!files.cert.empty() && !files.key.empty() && !files.ca.empty()) {
    for (const auto& [name, path] : {std::pair{&names.cert, &files.cert}, std::pair{&names.key, &files.key},
                                     std::pair{&names.ca, &files.ca}}) {
      std::FILE* f = std::fopen(path->c_str(), "rb");
      if (f == nullptr)
        return invalid_argument("cpu communicator: " + *name + ": cannot use " + *path + " (" +
                                std::strerror(errno) + ")");
      std::fclose(f);
    }
  }
  auto ctx = net::TlsContext::load(files, names);
  if (!ctx.ok()) return Status(ctx.status().code(), "cpu communicator: " + ctx.status().message());
  return ctx;
}

}  // namespace

const net::HandshakeSpec& comm_handshake() {
  static const net::HandshakeSpec spec{
      "troupeCA",
      "troupe comm v1",
      "the troupe cpu communicator handshake",
      "cluster secret",
      "",
      "every node needs --tls-cert/--tls-key from the same --tls-ca",
      " (TROUPE_CLUSTER_SECRET_FILE, set by troupe node --secret-file, must name the same secret on every node)",
  };
  return spec;
}

Result<std::string> cluster_secret() {
  const std::string path = env("TROUPE_CLUSTER_SECRET_FILE");
  if (path.empty()) return std::string();
  auto secret = net::read_secret_file(path);
  if (!secret.ok())
    return Status(secret.status().code(), "cpu communicator: " + secret.status().message() +
                                              (secret.status().code() == StatusCode::not_found
                                                   ? " (TROUPE_CLUSTER_SECRET_FILE)"
                                                   : ""));
  return secret;
}

Result<std::string> secret_of_world(const std::string& world_secret) {
  if (!world_secret.empty()) return world_secret;
  return cluster_secret();
}

Result<std::shared_ptr<const net::TlsContext>> comm_tls() {
  // Loaded once (the files of a node do not change while it runs); a failure is told every time.
  static std::mutex mu;
  static bool loaded = false;
  // Never destroyed: used until the process ends (and never freed after OpenSSL's own cleanup).
  static auto* ctx = new std::shared_ptr<const net::TlsContext>();
  std::lock_guard lock(mu);
  if (loaded) return *ctx;
  auto c = load_from_env();
  if (!c.ok()) return c.status();
  *ctx = std::move(*c);
  loaded = true;
  return *ctx;
}

}  // namespace troupe::cpu::tcp
