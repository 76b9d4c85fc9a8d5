// `kvgate coldstart`: measure where a server's start goes (see docs/coldstart.md).
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::coldstart {

void add_coldstart_command(CLI::App& app);

}  // namespace kvgate::coldstart
