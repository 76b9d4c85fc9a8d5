#include "env/system_clock.h"

#include <chrono>

namespace kvgate::env {

namespace {

class SystemClock final : public Clock {
 public:
  Nanos now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                origin_)
        .count();
  }
  Nanos wall_now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  const std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
};

}  // namespace

const Clock& system_clock() {
  static const SystemClock clock{};
  return clock;
}

}  // namespace kvgate::env
