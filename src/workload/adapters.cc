#include "workload/adapters.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kvgate::workload {

AdapterPicker::AdapterPicker(const AdapterSpec& spec) : base_share_(spec.base_share) {
  cdf_.reserve(spec.count);
  double total = 0;
  for (uint32_t k = 0; k < spec.count; ++k) {
    const double w = spec.popularity == AdapterSpec::Popularity::kZipf
                         ? std::pow(static_cast<double>(k) + 1.0, -spec.zipf_s)
                         : 1.0;
    total += w;
    cdf_.push_back(total);
  }
  for (double& c : cdf_) c /= total;
  if (!cdf_.empty()) cdf_.back() = 1.0;
}

uint32_t AdapterPicker::pick(Rng& rng) const {
  if (cdf_.empty()) return 0;
  if (base_share_ > 0 && rng.uniform() < base_share_) return 0;
  const double u = rng.uniform();
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  const auto k = static_cast<uint32_t>(
      std::min<ptrdiff_t>(it - cdf_.begin(), static_cast<ptrdiff_t>(cdf_.size()) - 1));
  return k + 1;
}

}  // namespace kvgate::workload
