// `troupe node --host H --port P [--secret-file F] [--tls-cert C --tls-key K
// --tls-ca CA] [--port-file F]`: a worker
// node. Its actor system loads this process's plugins through its plugin-host
// actor, activates its platform, and publishes the plugin host behind a gate
// (actors/gate_actor.hpp) through CAF's middleman; a head (`troupe serve
// --nodes`, or one that starts local nodes itself) asks it for worker actors.
// Runs until SIGINT/SIGTERM, then ends its workers (the head hears of it at
// once), closes its links and exits 0 within a few seconds.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/engine_caf.hpp"
#include "actors/gate_actor.hpp"
#include "actors/plugin_host_actor.hpp"
#include "actors/status_error.hpp"
#include "apps/command.hpp"
#include "apps/tls_options.hpp"
#include "net/handshake.hpp"   // read_secret_file
#include "net/link_guard.hpp"  // LinkAuth
#include "troupe/log.hpp"

namespace troupe::apps {
namespace {

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string secret_file;
  std::string port_file;
  net::TlsFiles tls;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe node: error: %s\n", message.c_str());
  return 1;
}

int run_node(const Options& o) {
  if (o.port < 0 || o.port > 65535) return fail("--port must be in 0..65535 (0: any free port)");
  std::string secret;
  if (!o.secret_file.empty()) {
    auto s = net::read_secret_file(o.secret_file);
    if (!s) return fail(s.status().message());
    secret = *s;
  }
  // The platform's own links between nodes (the CPU platform's TCP communicator) prove
  // the same secret; the platform reads it from this file (platforms see no CLI).
  if (!o.secret_file.empty())
    ::setenv("TROUPE_CLUSTER_SECRET_FILE", std::filesystem::absolute(o.secret_file).c_str(), 1);
  else
    ::unsetenv("TROUPE_CLUSTER_SECRET_FILE");
  auto tls = net::TlsContext::load(o.tls);
  if (!tls) return fail(tls.status().message());
  // The platform's links between ranks (the CPU platform's TCP collectives) use the same
  // certificates; platforms see no CLI, so they get the files' names here.
  for (const auto& [name, path] : {std::pair{"TROUPE_TLS_CERT_FILE", &o.tls.cert},
                                   std::pair{"TROUPE_TLS_KEY_FILE", &o.tls.key},
                                   std::pair{"TROUPE_TLS_CA_FILE", &o.tls.ca}}) {
    if (*tls) ::setenv(name, std::filesystem::absolute(*path).c_str(), 1);
    else ::unsetenv(name);
  }
  if (secret.empty() && !*tls && !actors::is_loopback_host(o.host))
    return fail("a node listening on " + o.host +
                " (not loopback) needs --secret-file or TLS (--tls-cert, --tls-key, --tls-ca): without either any "
                "peer could run models here");

  // Signals are taken by sigwait below; block them before CAF starts its threads.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  caf::actor_system_config cfg;
  engine::configure_actor_system(cfg);
  auto system = std::make_unique<caf::actor_system>(cfg);
  auto host = actors::spawn_plugin_host_actor(*system, o.host);
  std::string platform;
  {
    caf::scoped_actor self{*system};
    Status status;
    self->request(host, std::chrono::minutes(2), actors::load_atom_v)
        .receive([&](std::string& p) { platform = p; },
                 [&](caf::error& e) { status = actors::to_status(e, "loading plugins"); });
    if (!status.ok()) return fail(status.to_string());
  }
  auto gate = actors::spawn_node_gate(*system, host, secret);
  // CAF listens on no port; the network reaches it through the link guard only.
  auto guard = actors::publish_guarded(*system, gate, o.host, static_cast<uint16_t>(o.port),
                                       net::LinkAuth(secret, *tls));
  if (!guard.ok()) return fail("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + guard.status().message());
  const uint16_t port = (*guard)->port();
  TROUPE_LOG_INFO("Node listening on {}:{} (platform {}{}{})", o.host, port, platform,
                  *tls ? ", TLS: peers need a certificate of " + o.tls.ca : std::string(),
                  secret.empty() ? (*tls ? "" : ", no secret: loopback only") : ", peers must prove the secret");
  if (!o.port_file.empty()) {
    // Written whole, then renamed, so a reader never sees half a number.
    const std::string tmp = o.port_file + ".tmp";
    { std::ofstream(tmp) << port << "\n"; }
    if (std::rename(tmp.c_str(), o.port_file.c_str()) != 0) return fail("cannot write the port file " + o.port_file);
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  const char* why = sig == SIGINT ? "SIGINT" : "SIGTERM";
  TROUPE_LOG_INFO("Node stopping ({}): ending its workers and its links", why);
  // Whatever waits below (a worker stuck in a step, CAF's shutdown waiting for it), the
  // node is gone within a few seconds, with status 0: it was asked to stop.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    std::fflush(nullptr);
    std::_Exit(0);
  }).detach();
  {
    // The plugin host ends its workers (its exit handler): the head's monitors of both get
    // their down messages through the links still open.
    caf::scoped_actor self{*system};
    self->monitor(host);
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(host, caf::exit_reason::user_shutdown);
    self->receive([](caf::down_msg&) {}, caf::after(std::chrono::seconds(1)) >> [] {});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // BASP carries them
  // Then every link closes: a head that has not heard yet sees the node gone now.
  guard->reset();
  gate = nullptr;
  host = nullptr;
  system.reset();
  TROUPE_LOG_INFO("Node stopped ({})", why);
  return 0;
}

const CommandRegistration kRegistration(
    "node", "Run a worker node: publish this process's plugin host for a head (troupe serve --nodes)",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("--host", o->host,
                     "Address to listen on (default 127.0.0.1; others need --secret-file or --tls-*)");
      sub.add_option("--port", o->port, "Port to listen on (0: any free port, see --port-file)");
      sub.add_option("--secret-file", o->secret_file,
                     "File whose first line is the secret a head must prove it knows (HMAC challenge)");
      sub.add_option("--port-file", o->port_file, "Write the port listened on to this file once listening");
      add_tls_options(sub, &o->tls);
      return [o]() { return run_node(*o); };
    });

}  // namespace
}  // namespace troupe::apps
