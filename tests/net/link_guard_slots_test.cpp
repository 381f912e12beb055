// The link guard's handshake slots (net/link_guard), on real loopback sockets:
// a source address has slots of its own, then shares the rest, so a flood of
// silent connections from 127.0.0.2 fills its own and the shared slots and is
// refused beyond them, while a dialer with the secret from 127.0.0.1 passes at
// once; a flood from the dialer's own address leaves it only the slots of that
// address (the limit of counting by address). Refusals are counted by cause.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "net/link_guard.hpp"
#include "tests/raw_socket.hpp"

namespace troupe::net {
namespace {

using namespace std::chrono_literals;
using troupe::testing::connect_from;

/// Whether the guard closed `fd` within `t` (a refused connection is closed at once).
bool closed_within(int fd, std::chrono::milliseconds t) {
  char buf[128];
  for (auto end = std::chrono::steady_clock::now() + t; std::chrono::steady_clock::now() < end;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

class LinkSlots : public ::testing::Test {
 protected:
  void SetUp() override {
    LinkLimits l;
    l.handshake_timeout = 5s;
    l.handshakes_per_source = 4;
    l.max_handshakes = 8;
    auto g = LinkGuard::listen("127.0.0.1", 0, [](Socket) -> Status { return {}; }, LinkAuth("the secret"),
                               "test node", l);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    guard_ = std::move(*g);
  }
  void TearDown() override {
    for (int fd : flood_) ::close(fd);
  }
  /// `n` silent connections from `source`; how many the guard kept.
  size_t flood(const char* source, size_t n) {
    std::vector<int> fds;
    for (size_t k = 0; k < n; ++k) {
      const int fd = connect_from(source, guard_->port());
      if (fd >= 0) fds.push_back(fd);
    }
    size_t kept = 0;
    for (int fd : fds) {
      if (closed_within(fd, 100ms)) {
        ::close(fd);
        continue;
      }
      ++kept;
      flood_.push_back(fd);
    }
    return kept;
  }

  std::unique_ptr<LinkGuard> guard_;
  std::vector<int> flood_;
};

TEST_F(LinkSlots, AFloodFromOneAddressKeepsItsOwnAndTheSharedSlotsAndNoMore) {
  const int probe = connect_from("127.0.0.2", guard_->port());
  if (probe < 0) GTEST_SKIP() << "cannot bind 127.0.0.2";
  ::close(probe);
  std::this_thread::sleep_for(300ms);  // its slot is free again
  EXPECT_EQ(flood("127.0.0.2", 200), 4u + 8u);
  EXPECT_GE(guard_->refusals()["handshake_slots"], 188u);
  // A dialer with the secret from another address passes at once.
  const auto t0 = std::chrono::steady_clock::now();
  auto inner = dial_link("127.0.0.1", guard_->port(), LinkAuth("the secret"), "test node", 2s);
  EXPECT_TRUE(inner.ok()) << inner.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST_F(LinkSlots, AFloodFromTheDialersOwnAddressLeavesItNothing) {
  EXPECT_EQ(flood("127.0.0.1", 50), 4u + 8u);
  auto inner = dial_link("127.0.0.1", guard_->port(), LinkAuth("the secret"), "test node", 1s);
  EXPECT_FALSE(inner.ok()) << "counting by address cannot tell a dialer from a flood of its own address";
}

}  // namespace
}  // namespace troupe::net
