#include "core/route/policy.h"

#include <algorithm>
#include <cmath>

namespace kvgate::route {

uint32_t RouteContext::uncached_tokens(const Candidate& c) const {
  const uint64_t cached = uint64_t{c.gpu_blocks} * block_size;
  return cached >= request.prompt_tokens ? 0
                                         : request.prompt_tokens - static_cast<uint32_t>(cached);
}

size_t pick_lowest_cost(std::span<const Candidate> c, Rng& rng) {
  size_t best = 0;
  size_t ties = 1;
  for (size_t i = 1; i < c.size(); ++i) {
    if (c[i].cost < c[best].cost) {
      best = i;
      ties = 1;
    } else if (c[i].cost == c[best].cost) {
      // Reservoir sampling: the k-th tie replaces the choice with probability 1/k, so
      // every tied candidate is equally likely, in one pass.
      ++ties;
      if (rng.below(ties) == 0) best = i;
    }
  }
  return best;
}

size_t pick_softmax(std::span<const Candidate> c, double temperature, Rng& rng) {
  if (!(temperature > 0) || c.size() == 1) return pick_lowest_cost(c, rng);
  double lo = c[0].cost;
  double hi = c[0].cost;
  for (const Candidate& x : c) {
    lo = std::min(lo, x.cost);
    hi = std::max(hi, x.cost);
  }
  if (!(hi > lo) || !std::isfinite(hi - lo)) {
    if (hi == lo) return rng.below(c.size());
    return pick_lowest_cost(c, rng);  // an infinite cost: just avoid it
  }
  const double scale = 1.0 / ((hi - lo) * temperature);
  double total = 0;
  for (const Candidate& x : c) total += std::exp(-(x.cost - lo) * scale);
  double u = rng.uniform() * total;
  for (size_t i = 0; i < c.size(); ++i) {
    u -= std::exp(-(c[i].cost - lo) * scale);
    if (u < 0) return i;
  }
  return c.size() - 1;
}

}  // namespace kvgate::route
