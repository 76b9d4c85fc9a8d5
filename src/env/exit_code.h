// The exit code a subcommand's callback leaves for main() to return. Header-only and in
// the shells' environment layer, below every shell, so that each shell (sim, engine,
// gateway, loadgen, cli) sets it without linking the cli layer that links them all.
//
//   cmd->callback([args] { env::set_exit_code(run(*args)); });   // a subcommand
//   return kvgate::env::exit_code();                              // main()
#pragma once

namespace kvgate::env {

inline int& exit_code_slot() {
  static int code = 0;
  return code;
}
inline void set_exit_code(int code) { exit_code_slot() = code; }
inline int exit_code() { return exit_code_slot(); }

}  // namespace kvgate::env
