// `kvgate engine`: runs one simulated vLLM-compatible engine (see engine_server.h).
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::engine_server {

void add_engine_command(CLI::App& app);

}  // namespace kvgate::engine_server
