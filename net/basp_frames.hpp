// The framing of CAF 0.17.6's BASP (libcaf_io/caf/io/basp/header.hpp,
// message_type.hpp; serialized by binary_serializer in network byte order):
// every message is a 32-byte header, then `payload_len` bytes of payload.
//
//   offset 0  operation     uint8  (server_handshake 0 .. heartbeat 6)
//          1  padding       2 bytes
//          3  flags         uint8
//          4  payload_len   uint32, big-endian
//          8  operation_data, source_actor, dest_actor: 3 x uint64
//
// CAF's broker reads the header, then asks its socket for exactly
// `payload_len` bytes (basp_broker.cpp: receive_policy::exactly) and sizes a
// buffer for them before any byte of it arrives: a header claiming 4 GB costs
// 4 GB. CAF 0.17.6 has no setting that bounds it, so the link guard
// (link_guard.hpp) runs every byte a peer sends through this check first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::net {

constexpr size_t kBaspHeaderBytes = 32;
constexpr uint8_t kBaspLastOperation = 6;  // heartbeat

/// Follows a BASP byte stream and stops it at the first header that names an unknown
/// operation or a payload above `max_payload`.
class BaspFrameCheck {
 public:
  explicit BaspFrameCheck(uint32_t max_payload) : max_payload_(max_payload) {}

  /// Feeds the next `n` bytes of the stream. False once the stream broke the framing;
  /// error() then says how (and every later call is false too).
  bool feed(const uint8_t* data, size_t n);
  const std::string& error() const { return error_; }
  /// Whole messages seen so far.
  uint64_t messages() const { return messages_; }

 private:
  uint32_t max_payload_;
  uint8_t header_[kBaspHeaderBytes] = {};
  size_t header_have_ = 0;
  uint64_t payload_left_ = 0;
  uint64_t messages_ = 0;
  std::string error_;
};

}  // namespace troupe::net
