// Time as kvgate's core sees it: a count of nanoseconds passed in by the caller.
//
// The core never reads a clock. The gateway passes wall-clock time, the simulator
// virtual time, tests whatever they like; all three run the same code.
#pragma once

#include <cstdint>

namespace kvgate {

// Nanoseconds since an origin chosen by the caller (process start, simulation start).
using Nanos = int64_t;

inline constexpr Nanos kMicrosecond = 1'000;
inline constexpr Nanos kMillisecond = 1'000'000;
inline constexpr Nanos kSecond = 1'000'000'000;

constexpr Nanos seconds(double s) { return static_cast<Nanos>(s * 1e9); }
constexpr double to_seconds(Nanos t) { return static_cast<double>(t) / 1e9; }

}  // namespace kvgate
