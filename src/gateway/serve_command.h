// `kvgate serve CONFIG`: runs the gateway until SIGTERM/SIGINT, then drains and exits 0.
// `kvgate serve --check CONFIG`: validates the config (and keys file, tokenizers) and
// exits 0, or prints the error (file:line:col: field: message) and exits 2. It prints, per
// pool, where its routing token ids come from (tokenize_report).
#pragma once

#include <string>
#include <vector>

#include "core/common/result.h"

namespace CLI {
class App;
}

namespace kvgate::gateway {

struct GatewayConfig;

void add_serve_command(CLI::App& app);

// Two lines per pool, "pool NAME: tokenizer ...: fast path: WHY" and "pool NAME: chat
// template ...", saying which path its requests' routing ids take (local fast or general
// path, engine fallback, or none: pseudo-tokens) and why, as the pool would start. Errors:
// what would fail the start (a file that cannot be read, a refused one with `tokenize:
// local`). `kvgate serve --check` and `kvgate tokenize --config` print it.
Result<std::vector<std::string>> tokenize_report(const GatewayConfig& config);

}  // namespace kvgate::gateway
