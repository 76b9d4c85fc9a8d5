// Run statistics for `kvgate coldstart`: the median and range of one measure over runs,
// and the check that runs agree (the seed's caveat: "Start times varied by 20% or more
// between runs of the same configuration").
#pragma once

#include <optional>
#include <span>

namespace kvgate::coldstart {

struct Summary {
  size_t count = 0;
  double median = 0;  // of an even count: the mean of the two middle values
  double min = 0;
  double max = 0;
};

// nullopt for no values.
std::optional<Summary> summarize(std::span<const double> values);

// (max - min) / median: how far apart the runs are, relative to the typical run. 0 for a
// single run; infinite when the median is 0 but the runs differ.
double relative_spread(const Summary& s);

// Whether the runs differ by more than `fraction` (0.2 = 20%) of the median.
bool spread_exceeds(const Summary& s, double fraction);

}  // namespace kvgate::coldstart
