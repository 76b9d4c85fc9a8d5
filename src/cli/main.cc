// kvgate: one binary, one subcommand per job. Each subcommand lives in its own module
// and registers itself here through an add_..._command(CLI::App&) function.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "env/exit_code.h"

int main(int argc, char** argv) {
  CLI::App app{
      "kvgate: a gateway, KV-cache-aware router and autoscaler for fleets of LLM inference "
      "servers (vLLM and servers that speak its protocols)."};
  app.set_version_flag("--version", "kvgate 0.1.0");
  app.require_subcommand(0, 1);
  kvgate::cli::add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return kvgate::env::exit_code();
}
