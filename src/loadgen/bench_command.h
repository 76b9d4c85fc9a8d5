// `kvgate bench`: the load generator's subcommand (see load_generator.h).
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::loadgen {

void add_bench_command(CLI::App& app);

}  // namespace kvgate::loadgen
