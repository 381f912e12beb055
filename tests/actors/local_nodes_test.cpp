// Local node processes the head starts itself: they listen, ask for the
// generated secret, answer their plugin host's report, and are gone after the
// LocalNodes object is.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <signal.h>

#include "actors/engine_caf.hpp"
#include "actors/gate_actor.hpp"
#include "actors/local_nodes.hpp"
#include "actors/status_error.hpp"

namespace troupe::actors {
namespace {

TEST(LocalNodes, StartServeAndStop) {
  std::vector<pid_t> pids;
  {
    auto nodes = LocalNodes::start(TROUPE_EXE, 2, std::chrono::seconds(60));
    ASSERT_TRUE(nodes.ok()) << nodes.status().to_string();
    ASSERT_EQ((*nodes)->addresses().size(), 2u);
    pids = (*nodes)->pids();
    caf::actor_system_config cfg;
    engine::configure_actor_system(cfg);
    caf::actor_system system{cfg};
    for (const auto& address : (*nodes)->addresses()) {
      std::string host;
      uint16_t port = 0;
      ASSERT_TRUE(parse_host_port(address, "node", &host, &port).ok());
      auto refused = connect_node(system, host, port, "a guess", std::chrono::seconds(10));
      EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument) << refused.status().to_string();
      auto node = connect_node(system, host, port, (*nodes)->secret(), std::chrono::seconds(10));
      ASSERT_TRUE(node.ok()) << node.status().to_string();
      caf::scoped_actor self{system};
      std::string report;
      self->request(*node, std::chrono::seconds(30), report_atom_v)
          .receive([&](std::string& r) { report = r; }, [&](caf::error& e) { FAIL() << to_status(e).to_string(); });
      // No head has named a platform yet: the node activates none, and says which it would pick.
      EXPECT_NE(report.find("\"activated\":null"), std::string::npos) << report;
      EXPECT_NE(report.find("\"selected\":\"cpu\""), std::string::npos) << report;
    }
  }
  for (pid_t pid : pids) EXPECT_NE(::kill(pid, 0), 0) << "node " << pid << " outlived its LocalNodes";
}

TEST(LocalNodes, ANodeThatCannotStartIsAClearError) {
  auto nodes = LocalNodes::start("/bin/false", 1, std::chrono::seconds(30));
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(nodes.status().message().find("exited with code 1 before it listened"), std::string::npos)
      << nodes.status().message();
}

TEST(LocalNodes, ParseHostPort) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(parse_host_port("10.0.0.2:7001", "x", &host, &port).ok());
  EXPECT_EQ(host, "10.0.0.2");
  EXPECT_EQ(port, 7001);
  EXPECT_TRUE(parse_host_port("[::1]:80", "x", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  for (const char* bad : {"nohost", ":80", "h:", "h:0", "h:65536", "h:8a"})
    EXPECT_FALSE(parse_host_port(bad, "x", &host, &port).ok()) << bad;
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("10.1.2.3"));
}

TEST(LocalNodes, GateProofIsHmacOfTheNonce) {
  EXPECT_EQ(gate_proof("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

}  // namespace
}  // namespace troupe::actors
