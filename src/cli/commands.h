// The subcommands of the kvgate binary. Each is defined in its own module; add_commands
// adds them all. A subcommand's callback stores its exit code with set_exit_code
// (cli/exit_code.h).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/exit_code.h"

namespace kvgate::cli {

void add_commands(CLI::App& app);

}  // namespace kvgate::cli
