// `kvgate serve CONFIG`: runs the gateway until SIGTERM/SIGINT, then drains and exits 0.
// `kvgate serve --check CONFIG`: validates the config (and keys file, tokenizers) and
// exits 0, or prints the error (file:line:col: field: message) and exits 2.
#pragma once

namespace CLI {
class App;
}

namespace kvgate::gateway {

void add_serve_command(CLI::App& app);

}  // namespace kvgate::gateway
