// The subcommands of the kvgate binary. Each is defined in its own module; add_commands
// adds them all. A subcommand's callback stores its exit code with set_exit_code.
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::cli {

void add_commands(CLI::App& app);
void set_exit_code(int code);
int exit_code();

}  // namespace kvgate::cli
