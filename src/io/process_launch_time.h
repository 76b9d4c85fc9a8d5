// process_launch_time: when this process was launched (exec'd), on the steady clock.
//
// A simulated server that times its startup from main() misses the time the loader and
// its own initialisation took before; a real vLLM's "python imports" phase starts at the
// launch. Linux only (/proc/self/stat, field 22, in clock ticks of CLOCK_BOOTTIME), so the
// resolution is one tick (10 ms); falls back to now() when it cannot be read.
#pragma once

#include <chrono>

namespace kvgate::io {

std::chrono::steady_clock::time_point process_launch_time();

}  // namespace kvgate::io
