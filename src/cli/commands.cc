#include "cli/commands.h"

namespace kvgate::cli {
namespace {
int exit_code = 0;
}  // namespace

void SetExitCode(int code) { exit_code = code; }
int ExitCode() { return exit_code; }

void AddCommands(CLI::App& app) {
  // One line per subcommand module.
  (void)app;
}

}  // namespace kvgate::cli
