// `kvgate tokenize`: encode/decode with a tokenizer.json and render chat templates.
#pragma once

#include <CLI/CLI.hpp>

namespace kvgate::cli {

void add_tokenize_command(CLI::App& app);

}  // namespace kvgate::cli
