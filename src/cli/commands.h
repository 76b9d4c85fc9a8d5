// The subcommands of the kvgate binary. Each is defined in its own module; AddCommands
// adds them all. A subcommand's callback stores its exit code with SetExitCode.
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::cli {

void AddCommands(CLI::App& app);
void SetExitCode(int code);
int ExitCode();

}  // namespace kvgate::cli
