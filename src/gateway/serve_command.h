// `kvgate serve CONFIG`: runs the gateway until SIGTERM/SIGINT, then drains and exits 0.
// `kvgate serve --check CONFIG`: validates the config (and keys file, tokenizers) and
// tries each discovery source as serve would start it (check_discovery), and exits 0; it
// prints, per pool, where its routing token ids come from (tokenize_report).
//
// One rule for both: what `serve` refuses, `--check` refuses, with the same message and
// exit code: 2 for a config error (file:line:col: field: message), 1 for a config that
// cannot start ("kvgate serve: pool main: discovery source file: discovery file
// /x/e.yaml: cannot watch /x: Permission denied", a Kubernetes source without readable
// credentials). Binding the listeners is serve's alone (a port in use exits 1 there).
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
