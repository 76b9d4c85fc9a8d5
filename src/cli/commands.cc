#include "cli/commands.h"

#include "cli/coldstart/coldstart_command.h"
#include "cli/tokenize_command.h"
#include "engine/engine_command.h"
#include "epp/epp_command.h"
#include "gateway/data/keys.h"
#include "gateway/serve_command.h"
#include "loadgen/bench_command.h"
#include "sim/sim_command.h"

namespace kvgate::cli {
void add_commands(CLI::App& app) {
  // One line per subcommand module.
  kvgate::coldstart::add_coldstart_command(app);
  add_tokenize_command(app);
  engine_server::add_engine_command(app);
  sim::add_sim_command(app);
  gateway::add_serve_command(app);
  epp::add_epp_command(app);
  gateway::add_keys_command(app);
  loadgen::add_bench_command(app);
}

}  // namespace kvgate::cli
