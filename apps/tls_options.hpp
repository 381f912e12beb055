// --tls-cert, --tls-key, --tls-ca: mutual TLS on the links between troupe
// processes (net/tls.hpp), for every command that listens for or dials
// one: `troupe node`, the head (`serve`, `generate`: its --nodes and its stats
// port), `troupe stats --connect`, `troupe plugins --node`. `troupe certs`
// makes a cluster CA and the files.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "net/tls.hpp"

namespace troupe::apps {

inline void add_tls_options(CLI::App& sub, net::TlsFiles* files) {
  sub.add_option("--tls-cert", files->cert,
                 "PEM certificate of this process for mutual TLS on links between troupe processes (with "
                 "--tls-key and --tls-ca; `troupe certs` makes them)");
  sub.add_option("--tls-key", files->key, "PEM private key of --tls-cert");
  sub.add_option("--tls-ca", files->ca,
                 "PEM cluster CA: every peer's certificate must chain to it (TLS 1.3, both sides present one)");
}

}  // namespace troupe::apps
