// The subcommands of the kvgate binary. Each is defined in its own module; add_commands
// adds them all. A subcommand's callback stores its exit code with env::set_exit_code
// (env/exit_code.h), which main() returns.
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::cli {

void add_commands(CLI::App& app);

}  // namespace kvgate::cli
