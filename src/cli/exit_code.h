// The exit code a subcommand's callback leaves for main() to return. Header-only, so
// that every shell can set it without linking the cli layer that links them all.
#pragma once

namespace kvgate::cli {

inline int& exit_code_slot() {
  static int code = 0;
  return code;
}
inline void set_exit_code(int code) { exit_code_slot() = code; }
inline int exit_code() { return exit_code_slot(); }

}  // namespace kvgate::cli
