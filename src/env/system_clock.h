// system_clock: the process's real Clock (core/common/clock.h), the one that reads the OS.
//
// now() is std::chrono::steady_clock since the clock's first use in the process (so the
// gateway's times start near zero); wall_now() is std::chrono::system_clock since the
// Unix epoch. The shells' owners (`kvgate serve`, `kvgate engine`, the I/O clients'
// defaults) pass it down; tests pass a ManualClock.
//
//   auto gw = Gateway::start(config);  // GatewayOptions::clock defaults to it
//   const Clock& clock = env::system_clock();
//
// Thread-safe; lives as long as the process.
#pragma once

#include "core/common/clock.h"

namespace kvgate::env {

const Clock& system_clock();

}  // namespace kvgate::env
