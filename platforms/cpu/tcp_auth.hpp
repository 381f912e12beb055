// Authentication of every connection of the CPU platform's TCP communicator
// (tcp_communicator.hpp) with the cluster secret: a challenge-response with a
// fresh nonce on each side, before a connection carries anything else.
//
//   listener -> peer   challenge: magic "troupeCA", version, nonce_s (32 bytes)
//   peer -> listener   answer: magic, nonce_c (32 bytes),
//                      HMAC-SHA256(secret, "troupe comm v1 client" nonce_s nonce_c)
//   listener -> peer   verdict: 0 (accepted) or 1 (refused),
//                      HMAC-SHA256(secret, "troupe comm v1 server" nonce_s nonce_c)
//
// Both sides prove the secret, so a rank never sends activations to, nor takes
// a table of listeners from, a peer that does not know it. Every message has a
// fixed size: nothing a stranger sends is buffered beyond 72 bytes.
//
// The secret: the first line of the file named by TROUPE_CLUSTER_SECRET_FILE
// (`troupe node --secret-file` sets it for its own process); without it the
// proofs are HMACs under the empty key (loopback-only nodes run without a
// secret), and the handshake still keeps strangers out of the data path.
//
// HMAC, random bytes and constant-time comparison come from OpenSSL's
// libcrypto, called here directly: platforms build on the SDK only, so the
// runtime's crypto module (net/) is out of reach.
#pragma once

#include <cstddef>
#include <string>

#include "platforms/cpu/tcp_socket.hpp"
#include "troupe/status.hpp"

namespace troupe::cpu::tcp {

constexpr size_t kAuthNonceBytes = 32;
constexpr size_t kAuthChallengeBytes = 8 + 1 + kAuthNonceBytes;
constexpr size_t kAuthAnswerBytes = 8 + kAuthNonceBytes + 32;
constexpr size_t kAuthVerdictBytes = 1 + 32;

/// The cluster secret of this process (TROUPE_CLUSTER_SECRET_FILE; empty without it).
Result<std::string> cluster_secret();
/// What a world's connections prove: `world_secret` (parallel.communicator_secret, which a
/// head reaching its nodes over TLS alone sends them over those links), else cluster_secret().
Result<std::string> secret_of_world(const std::string& world_secret);

/// The listener's side, as steps a poll loop can drive: the challenge to send...
Result<std::string> make_challenge(std::string* nonce_s);
/// ...and, once kAuthAnswerBytes arrived, the verdict to send back. Sets `*accepted`;
/// `*why` says what was wrong when it is not.
std::string judge_answer(const std::string& secret, const std::string& nonce_s, const std::string& answer,
                         bool* accepted, std::string* why);

/// The connecting side, blocking until `deadline`: reads the challenge, answers it, and
/// checks the verdict and the listener's proof. Errors start with `who`: unavailable (it
/// closed or was silent), invalid_argument (it refused our proof, could not prove its
/// own, or does not speak this protocol).
Status authenticate_to(Fd& fd, const std::string& secret, Clock::time_point deadline, const std::string& who);

}  // namespace troupe::cpu::tcp
