#include "net/handshake.hpp"

#include <poll.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "net/crypto.hpp"
#include "net/frames.hpp"

namespace troupe::net {
namespace {

constexpr char kVersion = 1;
constexpr size_t kMagicBytes = 8;
constexpr size_t kMaxOutstandingNonces = 64;

std::string as_bytes(const crypto::Sha256Digest& d) {
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

/// HMAC-SHA256(secret, label " " role nonce_s nonce_c): the proof of `role` ("client", "server").
std::string proof(const HandshakeSpec& spec, const std::string& secret, const char* role, const std::string& nonce_s,
                  const std::string& nonce_c) {
  return as_bytes(crypto::hmac_sha256(secret, spec.label + " " + role + nonce_s + nonce_c));
}

bool has_magic(const HandshakeSpec& spec, const std::string& message) {
  return message.compare(0, kMagicBytes, spec.magic, 0, kMagicBytes) == 0;
}

std::string not_spoken(const HandshakeSpec& spec) {
  return "does not speak " + spec.name + " (another program, or another troupe version)";
}

}  // namespace

// -- The listening side -------------------------------------------------------------------

ServerHandshake::ServerHandshake(Stream s, const HandshakeSpec& spec, std::string secret)
    : s_(std::move(s)), spec_(&spec), secret_(std::move(secret)) {}

ServerHandshake::State ServerHandshake::end(State state, std::string why) {
  why_ = std::move(why);
  s_.close();
  return state;
}

bool ServerHandshake::flush() {
  while (out_done_ < out_.size()) {
    size_t put = 0;
    const auto r = s_.write(out_.data() + out_done_, out_.size() - out_done_, &put);
    if (r == Stream::Io::done) {
      out_done_ += put;
      continue;
    }
    return r == Stream::Io::again;
  }
  return true;
}

short ServerHandshake::events() const {
  return s_.events(!verdict_, out_done_ < out_.size());
}

ServerHandshake::State ServerHandshake::judge() {
  const std::string nonce_c = in_.substr(kMagicBytes, kNonceBytes);
  const std::string got = in_.substr(kMagicBytes + kNonceBytes, kProofBytes);
  if (!crypto::equal_constant_time(got, proof(*spec_, secret_, "client", nonce_, nonce_c))) {
    // Told, so the refused side can say why; nothing else follows.
    out_.assign(kVerdictBytes, '\0');
    out_[0] = '\1';
    out_done_ = 0;
    flush();
    return end(State::refused, "wrong " + spec_->secret_name);
  }
  out_.assign(1, '\0');
  out_ += proof(*spec_, secret_, "server", nonce_, nonce_c);
  out_done_ = 0;
  verdict_ = true;
  if (!flush()) return end(State::left, "the connection failed: " + s_.error());
  return out_done_ < out_.size() ? State::running : State::accepted;
}

ServerHandshake::State ServerHandshake::step(short revents) {
  if (!s_.handshake_done()) {
    const auto r = s_.handshake();
    if (r == Stream::Io::again) return State::running;
    // A peer that is refused (its certificate) or refuses ours (an alert) is refused.
    if (r != Stream::Io::done) return end(State::refused, "TLS handshake failed: " + s_.error());
    revents = POLLOUT;
  }
  if (!challenged_) {
    auto nonce = crypto::random_bytes(kNonceBytes);
    if (!nonce.ok()) return end(State::refused, nonce.status().message());
    nonce_ = std::move(*nonce);
    out_ = spec_->magic.substr(0, kMagicBytes) + kVersion + nonce_;
    out_done_ = 0;
    challenged_ = true;
    revents |= POLLOUT;
  }
  if ((revents & POLLOUT) && !flush()) return end(State::left, "the connection failed: " + s_.error());
  if (verdict_) return out_done_ < out_.size() ? State::running : State::accepted;
  if (revents == 0 && !s_.pending()) return State::running;
  char buf[kAnswerBytes];
  size_t got = 0;
  const auto r = s_.read(buf, kAnswerBytes - in_.size(), &got);
  if (r == Stream::Io::again) return State::running;
  if (r == Stream::Io::closed) return end(State::left, "it closed the connection");
  if (r == Stream::Io::failed) return end(s_.is_tls() ? State::refused : State::left, s_.error());
  in_.append(buf, got);
  if (in_.size() < kAnswerBytes) return State::running;
  if (!has_magic(*spec_, in_)) return end(State::refused, "it " + not_spoken(*spec_));
  return judge();
}

// -- The dialing side ----------------------------------------------------------------------

namespace {

Status tls_client_handshake(Stream& s, const HandshakeSpec& spec, Clock::time_point deadline,
                            const std::string& who) {
  for (;;) {
    const auto r = s.handshake();
    if (r == Stream::Io::done) return {};
    if (r != Stream::Io::again)
      return invalid_argument("TLS handshake with " + who + " failed: " + s.error() + " (" + spec.tls_hint + ")");
    if (Clock::now() >= deadline)
      return unavailable(who + " did not finish the TLS handshake in time (does it run with TLS?)");
    pollfd p{s.fd(), s.events(true, false), 0};
    ::poll(&p, 1, poll_ms(deadline));
  }
}

}  // namespace

Status client_handshake(Stream& s, const HandshakeSpec& spec, const std::string& secret, Clock::time_point deadline,
                        const std::string& who) {
  if (s.is_tls()) TROUPE_RETURN_IF_ERROR(tls_client_handshake(s, spec, deadline, who));
  std::string challenge(kChallengeBytes, '\0');
  TROUPE_RETURN_IF_ERROR(read_exact(s, challenge.data(), challenge.size(), deadline, who, spec.during));
  if (!has_magic(spec, challenge) || challenge[kMagicBytes] != kVersion)
    return unavailable(who + " " + not_spoken(spec));
  const std::string nonce_s = challenge.substr(kMagicBytes + 1, kNonceBytes);
  auto nonce_c = crypto::random_bytes(kNonceBytes);
  if (!nonce_c.ok()) return nonce_c.status();
  const std::string answer =
      spec.magic.substr(0, kMagicBytes) + *nonce_c + proof(spec, secret, "client", nonce_s, *nonce_c);
  TROUPE_RETURN_IF_ERROR(write_exact(s, answer.data(), answer.size(), deadline, who, spec.during));
  std::string verdict(kVerdictBytes, '\0');
  TROUPE_RETURN_IF_ERROR(read_exact(s, verdict.data(), verdict.size(), deadline, who, spec.during));
  if (verdict[0] != 0)
    return invalid_argument(who + " refused the connection: wrong " + spec.secret_name + spec.refused_hint);
  if (!crypto::equal_constant_time(verdict.substr(1), proof(spec, secret, "server", nonce_s, *nonce_c)))
    return invalid_argument(who + " did not prove the cluster secret (another secret on its side, or another "
                                  "program at its address)");
  return {};
}

// -- The gates' challenges -----------------------------------------------------------------

Result<std::string> Challenges::issue() {
  // 256 bits from the OS's CSPRNG: a nonce nobody can predict or replay.
  auto nonce = crypto::random_hex(kNonceBytes);
  if (!nonce.ok()) return nonce.status();
  nonces_.push_back(*nonce);
  if (nonces_.size() > kMaxOutstandingNonces) nonces_.pop_front();
  return nonce;
}

Challenges::Verdict Challenges::redeem(const std::string& nonce, const std::string& proof, const std::string& secret) {
  auto it = std::find(nonces_.begin(), nonces_.end(), nonce);
  if (it == nonces_.end()) return Verdict::unknown_nonce;
  nonces_.erase(it);
  if (!secret.empty() && !crypto::equal_constant_time(proof, nonce_proof(secret, nonce))) return Verdict::wrong_proof;
  return Verdict::accepted;
}

std::string nonce_proof(const std::string& secret, const std::string& nonce) {
  return crypto::to_hex(crypto::hmac_sha256(secret, nonce));
}

Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read the secret file " + path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.empty()) return invalid_argument("the secret file " + path + " is empty");
  return line;
}

}  // namespace troupe::net
