// ArrivalProcess: when open-loop requests arrive, from an ArrivalSpec.
//
// Poisson stages draw exponential gaps at each stage's rate (a stage boundary simply
// restarts the draw, which is exact for a memoryless process); constant stages space
// arrivals evenly; a diurnal curve is sampled by thinning a Poisson process at the
// curve's peak rate. Each arrival carries the index of its report stage.
#pragma once

#include <optional>
#include <vector>

#include "core/common/rng.h"
#include "workload/workload.h"

namespace kvgate::workload {

class ArrivalProcess {
 public:
  struct Arrival {
    Nanos at;
    uint32_t stage;
  };

  ArrivalProcess(const ArrivalSpec& spec, uint64_t seed);

  // The next arrival, or nullopt after the last stage.
  std::optional<Arrival> next();

  const std::vector<StageInfo>& stages() const { return stages_; }

 private:
  std::optional<Arrival> next_staged();
  std::optional<Arrival> next_diurnal();

  ArrivalSpec spec_;
  Rng rng_;
  std::vector<StageInfo> stages_;
  size_t stage_ = 0;
  double t_ = 0;  // seconds
};

}  // namespace kvgate::workload
