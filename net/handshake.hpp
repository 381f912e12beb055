// The one challenge-response on the cluster secret that every link between
// troupe processes passes before it carries anything else: the link guard's
// links (head <-> node, the stats port; link_guard.hpp) and the CPU platform's
// collectives between nodes. Every message has a fixed size, so nothing a
// stranger sends is buffered beyond 72 bytes:
//
//   listener -> peer   challenge: magic (8 bytes), version 1, nonce_s (32 random bytes)
//   peer -> listener   answer: magic, nonce_c (32 random bytes),
//                      HMAC-SHA256(secret, label " client" nonce_s nonce_c)
//   listener -> peer   verdict: 0 (accepted) or 1 (refused),
//                      HMAC-SHA256(secret, label " server" nonce_s nonce_c)
//
// so both sides prove the secret with fresh nonces and the secret never
// crosses the wire. A protocol (HandshakeSpec) names its magic and label: the
// link guard's is "troupeLK" / "troupe link v1", the collectives' "troupeCA" /
// "troupe comm v1"; they stay apart on the wire, so a proof for one is no
// proof for the other. With TLS (tls.hpp) the TLS handshake comes first and
// this one runs inside it. With an empty secret the proofs are HMACs under the
// empty key: the handshake still keeps strangers out, but authenticates
// nothing (TLS then does, or the link is loopback only).
//
// The gates (actors/gate_actor.hpp) answer a challenge carried by CAF
// messages instead: Challenges below, on the same nonces, HMAC and
// constant-time comparison.
#pragma once

#include <cstddef>
#include <deque>
#include <string>

#include "net/stream.hpp"
#include "troupe/status.hpp"

namespace troupe::net {

/// One protocol of the handshake, and how its errors name it.
struct HandshakeSpec {
  std::string magic;         // 8 bytes: the challenge and the answer start with it
  std::string label;         // what the proofs are bound to ("troupe link v1")
  std::string name;          // "the troupe link handshake": "it does not speak <name>"
  std::string secret_name;   // "secret", "cluster secret": "wrong <secret_name>"
  std::string during;        // the dialing side's I/O errors name it ("the link handshake"), or ""
  std::string tls_hint;      // what a failed TLS handshake on the dialing side suggests
  std::string refused_hint;  // after "refused the connection: wrong <secret_name>"
};

constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kChallengeBytes = 8 + 1 + kNonceBytes;
constexpr size_t kAnswerBytes = 8 + kNonceBytes + kProofBytes;
constexpr size_t kVerdictBytes = 1 + kProofBytes;

/// The listening side of one connection, as steps a poll loop drives: the TLS handshake
/// when the stream has TLS, the challenge, the answer (read exactly: what the peer sends
/// after it stays in the stream), the verdict. The caller owns the deadline.
class ServerHandshake {
 public:
  enum class State {
    running,   // poll for events() (or step at once while ready())
    accepted,  // the peer proved the secret and the verdict is out: take() the stream
    refused,   // the peer failed (TLS, not this protocol, a wrong proof): why() says how
    left,      // the connection closed or failed on its way: why() says how
  };

  /// `spec` must outlive the handshake.
  ServerHandshake(Stream s, const HandshakeSpec& spec, std::string secret);

  /// Progress with the poll() events that arrived (call it once with POLLOUT to start).
  State step(short revents);
  short events() const;
  /// TLS holds bytes poll() cannot see: step again without waiting.
  bool ready() const { return s_.pending(); }
  /// The TLS handshake is over (or there is none).
  bool tls_done() const { return s_.handshake_done(); }
  const std::string& why() const { return why_; }
  int fd() const { return s_.fd(); }
  Stream& stream() { return s_; }

 private:
  State end(State state, std::string why);
  bool flush();
  State judge();
  Stream s_;
  const HandshakeSpec* spec_;
  std::string secret_;
  bool challenged_ = false;  // the challenge is queued
  std::string nonce_;
  std::string out_;  // the challenge, then the verdict
  size_t out_done_ = 0;
  std::string in_;   // the answer
  bool verdict_ = false;  // the accepting verdict is queued
  std::string why_;
};

/// The dialing side, blocking until `deadline`: the TLS handshake when `s` has TLS, then the
/// challenge's answer and the check of the verdict and of the listener's proof. Errors
/// start with `who`: invalid_argument (it refused our proof or certificate, could not
/// prove its own, its certificate failed), unavailable (it closed, was silent, does not
/// speak this protocol).
Status client_handshake(Stream& s, const HandshakeSpec& spec, const std::string& secret, Clock::time_point deadline,
                        const std::string& who);

/// Nonces handed out in CAF messages (the gates') and not yet answered: at most 64, the
/// oldest forgotten first. The answer to a nonce is nonce_proof(secret, nonce).
class Challenges {
 public:
  enum class Verdict { accepted, unknown_nonce, wrong_proof };
  /// A fresh nonce (32 random bytes, lower-case hex).
  Result<std::string> issue();
  /// Uses up `nonce` and checks `proof` in constant time (an empty secret accepts any proof).
  Verdict redeem(const std::string& nonce, const std::string& proof, const std::string& secret);

 private:
  std::deque<std::string> nonces_;
};

/// Lower-case hex of HMAC-SHA256(secret, nonce).
std::string nonce_proof(const std::string& secret, const std::string& nonce);

/// The first line of a secret file (trailing whitespace dropped); errors name the file:
/// not_found (unreadable), invalid_argument (empty).
Result<std::string> read_secret_file(const std::string& path);

}  // namespace troupe::net
