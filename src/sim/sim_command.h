// `kvgate sim SCENARIO.yaml [--out DIR] [--seed N] [--policies a,b]`: runs a scenario's
// policies side by side on the same arrivals, prints one table, and writes CSV, JSON and
// SVG charts to DIR.
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::sim {

void add_sim_command(CLI::App& app);

}  // namespace kvgate::sim
