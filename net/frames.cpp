#include "net/frames.hpp"

#include <poll.h>

#include <cstring>

namespace troupe::net {
namespace {

/// Reads `n` bytes into `to`, or writes `n` bytes from `from` (the other one null).
Status io_exact(Stream& s, char* to, const char* from, size_t n, Clock::time_point deadline, const std::string& who,
                const std::string& during) {
  const bool writing = from != nullptr;
  const std::string in = during.empty() ? "" : " during " + during;
  size_t done = 0;
  while (done < n) {
    size_t k = 0;
    const auto r = writing ? s.write(from + done, n - done, &k) : s.read(to + done, n - done, &k);
    if (r == Stream::Io::done) {
      done += k;
      continue;
    }
    if (r == Stream::Io::closed)
      return unavailable(who + " closed the connection" + in + (s.is_tls() ? " (" + s.error() + ")" : ""));
    if (r == Stream::Io::failed) {
      // A TLS alert here is the peer refusing this side's certificate (TLS 1.3 tells the
      // connecting side after its half of the handshake).
      if (s.is_tls()) return invalid_argument(who + " refused the TLS connection: " + s.error());
      return unavailable(who + " reset the connection" + in + " (" + s.error() + ")");
    }
    if (Clock::now() >= deadline) {
      const std::string at = during.empty() ? "" : " " + during;
      return unavailable(who + (writing ? " did not take what was sent" + in : " did not answer" + at) + " in time");
    }
    pollfd p{s.fd(), s.events(!writing, writing), 0};
    ::poll(&p, 1, poll_ms(deadline));
  }
  return {};
}

}  // namespace

Status read_exact(Stream& s, void* data, size_t n, Clock::time_point deadline, const std::string& who,
                  const std::string& during) {
  return io_exact(s, static_cast<char*>(data), nullptr, n, deadline, who, during);
}

Status write_exact(Stream& s, const void* data, size_t n, Clock::time_point deadline, const std::string& who,
                   const std::string& during) {
  return io_exact(s, nullptr, static_cast<const char*>(data), n, deadline, who, during);
}

void FieldWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void FieldWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void FieldWriter::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  out_ += s;
}

bool FieldReader::take(void* out, size_t n) {
  if (!ok_ || in_.size() - at_ < n) return ok_ = false;
  std::memcpy(out, in_.data() + at_, n);
  at_ += n;
  return true;
}

uint32_t FieldReader::u32() {
  uint8_t b[4] = {};
  if (!take(b, 4)) return 0;
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

uint64_t FieldReader::u64() {
  uint8_t b[8] = {};
  if (!take(b, 8)) return 0;
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | b[i];
  return v;
}

std::string FieldReader::str() {
  const uint32_t n = u32();
  if (!ok_ || in_.size() - at_ < n) {
    ok_ = false;
    return {};
  }
  std::string s = in_.substr(at_, n);
  at_ += n;
  return s;
}

Status send_frame(Stream& s, const std::string& body, Clock::time_point deadline, const std::string& who) {
  FieldWriter w;
  w.u32(static_cast<uint32_t>(body.size()));
  const std::string framed = w.bytes() + body;
  return write_exact(s, framed.data(), framed.size(), deadline, who);
}

Result<std::string> receive_frame(Stream& s, uint32_t max_bytes, Clock::time_point deadline, const std::string& who,
                                  const std::string& what) {
  char len_bytes[4] = {};
  TROUPE_RETURN_IF_ERROR(read_exact(s, len_bytes, 4, deadline, who));
  const uint32_t len = FieldReader(std::string(len_bytes, 4)).u32();
  if (len > max_bytes)
    return invalid_argument(who + " sent a " + what + " of " + std::to_string(len) + " bytes (at most " +
                            std::to_string(max_bytes) + ")");
  std::string body(len, '\0');
  TROUPE_RETURN_IF_ERROR(read_exact(s, body.data(), len, deadline, who));
  return body;
}

}  // namespace troupe::net
