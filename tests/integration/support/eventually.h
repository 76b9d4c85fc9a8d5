// eventually(): polls a condition until it holds or a deadline passes, for the tests.
//
// For a state that another thread or process reaches and that offers nothing to wait on
// (no future, no condition variable, no line of output): a counter, a metric, an admin
// API's answer. Each call site says what it waits for. A test that can drive the clock
// (ManualClock, io::ClockTimer) advances it instead; a test that can wait on a future
// or a condition variable does that. Depends on nothing but the standard library, so the
// unit tests (tests/<layer>/) include it as well as the integration tests.
//
//   ASSERT_TRUE(eventually([&] { return server.connections() == 0; }));
//   ASSERT_TRUE(eventually([&] { return gw.metric("kvgate_active_streams") == 4; }, 5s));
#pragma once

#include <chrono>
#include <thread>

namespace kvgate::testing {

// Polls `pred` every `every` until it holds or `timeout` passes; returns whether it held.
// `pred` is checked once more after the last pause, so a state reached just before the
// deadline counts.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    // The pause between two polls of every wait in the tests; the call names what it is.
    std::this_thread::sleep_for(every);
  }
}

}  // namespace kvgate::testing
