#include "platforms/cpu/tcp_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cctype>
#include <cstdlib>
#include <fstream>

namespace troupe::cpu::tcp {
namespace {

constexpr char kMagic[8] = {'t', 'r', 'o', 'u', 'p', 'e', 'C', 'A'};
constexpr uint8_t kVersion = 1;

std::string proof(const std::string& secret, const char* role, const std::string& nonce_s, const std::string& nonce_c) {
  const std::string message = std::string("troupe comm v1 ") + role + nonce_s + nonce_c;
  unsigned char out[32] = {};
  unsigned int len = 0;
  static const unsigned char kEmpty = 0;
  const auto* key = secret.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(secret.data());
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), out, &len) == nullptr || len != sizeof out)
    return std::string();  // never equal to a 32-byte proof: the handshake fails
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

bool same(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::string> random_bytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    return unavailable("cpu communicator: the OS's random number generator gave no bytes (RAND_bytes failed)");
  return out;
}

}  // namespace

Result<std::string> cluster_secret() {
  const char* path = std::getenv("TROUPE_CLUSTER_SECRET_FILE");
  if (path == nullptr || *path == '\0') return std::string();
  std::ifstream in(path);
  if (!in) return not_found(std::string("cpu communicator: cannot read the secret file ") + path +
                            " (TROUPE_CLUSTER_SECRET_FILE)");
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.empty()) return invalid_argument(std::string("cpu communicator: the secret file ") + path + " is empty");
  return line;
}

Result<std::string> secret_of_world(const std::string& world_secret) {
  if (!world_secret.empty()) return world_secret;
  return cluster_secret();
}

Result<std::string> make_challenge(std::string* nonce_s) {
  auto nonce = random_bytes(kAuthNonceBytes);
  if (!nonce.ok()) return nonce.status();
  *nonce_s = *nonce;
  return std::string(kMagic, sizeof kMagic) + static_cast<char>(kVersion) + *nonce;
}

std::string judge_answer(const std::string& secret, const std::string& nonce_s, const std::string& answer,
                         bool* accepted, std::string* why) {
  *accepted = false;
  if (answer.size() != kAuthAnswerBytes || answer.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0) {
    *why = "it does not speak the troupe cpu communicator handshake (another program, or another troupe version)";
    return std::string(1, '\1') + std::string(32, '\0');
  }
  const std::string nonce_c = answer.substr(sizeof kMagic, kAuthNonceBytes);
  if (!same(answer.substr(sizeof kMagic + kAuthNonceBytes), proof(secret, "client", nonce_s, nonce_c))) {
    *why = "wrong cluster secret";
    return std::string(1, '\1') + std::string(32, '\0');
  }
  *accepted = true;
  return std::string(1, '\0') + proof(secret, "server", nonce_s, nonce_c);
}

Status authenticate_to(Fd& fd, const std::string& secret, Clock::time_point deadline, const std::string& who) {
  std::string challenge(kAuthChallengeBytes, '\0');
  TROUPE_RETURN_IF_ERROR(read_all(fd, challenge.data(), challenge.size(), deadline, who));
  if (challenge.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0 ||
      static_cast<uint8_t>(challenge[sizeof kMagic]) != kVersion)
    return invalid_argument(who + " does not speak the troupe cpu communicator handshake (another program, or "
                                  "another troupe version)");
  const std::string nonce_s = challenge.substr(sizeof kMagic + 1, kAuthNonceBytes);
  auto nonce_c = random_bytes(kAuthNonceBytes);
  if (!nonce_c.ok()) return nonce_c.status();
  const std::string answer = std::string(kMagic, sizeof kMagic) + *nonce_c + proof(secret, "client", nonce_s, *nonce_c);
  TROUPE_RETURN_IF_ERROR(write_all(fd, answer.data(), answer.size(), deadline, who));
  std::string verdict(kAuthVerdictBytes, '\0');
  TROUPE_RETURN_IF_ERROR(read_all(fd, verdict.data(), verdict.size(), deadline, who));
  if (verdict[0] != 0)
    return invalid_argument(who + " refused the connection: wrong cluster secret (TROUPE_CLUSTER_SECRET_FILE, set by "
                                  "troupe node --secret-file, must name the same secret on every node)");
  if (!same(verdict.substr(1), proof(secret, "server", nonce_s, *nonce_c)))
    return invalid_argument(who + " did not prove the cluster secret (another secret on its side, or another "
                                  "program at its address)");
  return {};
}

}  // namespace troupe::cpu::tcp
