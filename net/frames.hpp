// Exact and framed I/O on a Stream, bounded by a deadline: what a blocking
// side of a link (a dialer in its handshake, the CPU collectives' rendezvous)
// reads and writes. A frame is a 4-byte little-endian length, then that many
// bytes; its fields are little-endian integers and length-prefixed strings
// (FieldWriter, FieldReader). No serializer: nothing here allocates what a
// peer announces beyond the caller's cap.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "net/stream.hpp"
#include "troupe/status.hpp"

namespace troupe::net {

/// Reads or writes exactly `n` bytes before `deadline`. Errors start with `who` ("the node
/// 10.0.0.5:7000", "rank 0 (10.0.0.5:4000)") and name `during` when given ("the link
/// handshake"): unavailable when it closed the connection, reset it or was silent;
/// invalid_argument, with TLS, when it refused this side's certificate (an alert).
Status read_exact(Stream& s, void* data, size_t n, Clock::time_point deadline, const std::string& who,
                  const std::string& during = "");
Status write_exact(Stream& s, const void* data, size_t n, Clock::time_point deadline, const std::string& who,
                   const std::string& during = "");

/// Little-endian fields of a frame.
class FieldWriter {
 public:
  void u32(uint32_t v);
  void u64(uint64_t v);
  void str(const std::string& s);
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

/// Reads what FieldWriter wrote; a short or oversized field makes it fail.
class FieldReader {
 public:
  explicit FieldReader(std::string bytes) : in_(std::move(bytes)) {}
  uint32_t u32();
  uint64_t u64();
  std::string str();
  /// Every field read so far was there.
  bool good() const { return ok_; }
  /// And nothing is left over.
  bool ok() const { return ok_ && at_ == in_.size(); }

 private:
  bool take(void* out, size_t n);
  std::string in_;
  size_t at_ = 0;
  bool ok_ = true;
};

/// Sends `body` as one frame.
Status send_frame(Stream& s, const std::string& body, Clock::time_point deadline, const std::string& who);
/// Receives one frame of at most `max_bytes`; a larger one is invalid_argument naming `what`
/// ("who sent a <what> of N bytes (at most M)"), and nothing of it is read.
Result<std::string> receive_frame(Stream& s, uint32_t max_bytes, Clock::time_point deadline, const std::string& who,
                                  const std::string& what = "message");

}  // namespace troupe::net
