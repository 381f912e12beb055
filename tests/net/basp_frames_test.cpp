// BaspFrameCheck against BASP streams written here from CAF 0.17.6's header
// layout (32 bytes, integers big-endian, payload_len at offset 4): whole and
// split headers, payloads skipped, an unknown operation and a payload above
// the cap stop the stream.
#include <gtest/gtest.h>

#include <string>

#include "net/basp_frames.hpp"

namespace troupe::net {
namespace {

std::string header(uint8_t op, uint32_t payload_len) {
  std::string h(32, '\0');
  h[0] = static_cast<char>(op);
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<char>(payload_len >> (24 - 8 * i));
  return h;
}

bool feed(BaspFrameCheck& c, const std::string& bytes) {
  return c.feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(BaspFrameCheck, FollowsMessagesAcrossAnySplit) {
  const std::string stream = header(6, 0) + header(2, 100) + std::string(100, 'p') + header(0, 7) + "payload";
  for (size_t piece : {1u, 5u, 32u, 33u, 1000u}) {
    BaspFrameCheck c(1000);
    for (size_t at = 0; at < stream.size(); at += piece) ASSERT_TRUE(feed(c, stream.substr(at, piece))) << piece;
    EXPECT_EQ(c.messages(), 3u) << piece;
  }
}

TEST(BaspFrameCheck, APayloadAboveTheCapStopsTheStream) {
  BaspFrameCheck c(64u << 20);
  EXPECT_TRUE(feed(c, header(2, 64u << 20)));  // exactly the cap: fine
  BaspFrameCheck big(64u << 20);
  EXPECT_FALSE(feed(big, header(1, 0xFFFFFF00u)));
  EXPECT_EQ(big.error(), "a BASP message of 4294967040 bytes (at most 67108864)");
  EXPECT_FALSE(feed(big, header(6, 0)));  // stays stopped
}

TEST(BaspFrameCheck, AnUnknownOperationStopsTheStream) {
  BaspFrameCheck c(1000);
  EXPECT_FALSE(feed(c, header(7, 0)));
  EXPECT_EQ(c.error(), "not a BASP message (operation 7)");
  BaspFrameCheck text(1000);
  EXPECT_FALSE(feed(text, "GET / HTTP/1.1\r\nHost: node\r\n\r\n  "));
}

}  // namespace
}  // namespace troupe::net
