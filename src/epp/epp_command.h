// `kvgate epp CONFIG`: the Endpoint Picker (docs/epp.md). Runs the gateway of CONFIG (the
// `kvgate serve` file: pools, discovery, flow control, keys, admin) without its HTTP
// listeners, and answers a data plane's (Envoy's) External Processing streams on the
// `epp:` section's gRPC address, until SIGTERM/SIGINT. Exit codes as serve's: 2 for a
// config error, 1 for one that cannot start (an address that cannot be bound).
#pragma once

namespace CLI {
class App;
}

namespace kvgate::epp {

void add_epp_command(CLI::App& app);

}  // namespace kvgate::epp
