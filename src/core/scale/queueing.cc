#include "core/scale/queueing.h"

#include <algorithm>
#include <cmath>

namespace kvgate::scale {

double erlang_c(int32_t servers, double offered) {
  if (!(offered > 0)) return 0;
  if (offered >= servers) return 1;
  // Erlang B by its stable recursion, then C = c B / (c - a (1 - B)).
  double b = 1;
  for (int32_t k = 1; k <= servers; ++k) b = offered * b / (k + offered * b);
  const double c = servers;
  return c * b / (c - offered * (1 - b));
}

double wait_exceeds(const QueueModel& m, double rate, double t_s) {
  if (!(rate > 0)) return 0;
  const double mu = 1 / m.service_s;
  const double a = rate / mu;
  if (a >= m.servers) return 1;
  const double pw = erlang_c(m.servers, a);
  if (t_s <= 0) return pw;
  const double decay = 2 * (m.servers * mu - rate) / (1 + std::max(m.service_cv2, 0.0));
  return pw * std::exp(-decay * t_s);
}

double max_rate(const QueueModel& m, double t_s, double quantile) {
  const double miss = 1 - quantile;
  const double saturation = m.servers / m.service_s;
  double lo = 0, hi = saturation;
  // P(wait > t) rises with the rate; bisect for where it crosses `miss`.
  while (hi - lo > 1e-4 * saturation) {
    const double mid = (lo + hi) / 2;
    (wait_exceeds(m, mid, t_s) <= miss ? lo : hi) = mid;
  }
  return lo;
}

ReplicaCapacity replica_capacity(const ReplicaProfile& p, const RequestMix& mix, double ttft_s,
                                 double quantile) {
  ReplicaCapacity out;
  const double hit = std::clamp(mix.prefix_hit_rate, 0.0, 1.0);
  const double uncached = std::max(0.0, mix.prompt_tokens * (1 - hit));
  const double output = std::max(1.0, mix.output_tokens);
  out.prefill_s = uncached / p.prefill_tokens_per_s;
  const double decode_s = output * p.itl_s;
  const double service = out.prefill_s + decode_s;
  // A cached prefix saves its prefill, not its KV: the sequence holds those blocks too
  // (shared with a concurrent sequence of the same prefix only, which a spread-out
  // router rarely gives).
  const double kv_per_request = std::max(1.0, std::max(0.0, mix.prompt_tokens) + output / 2);
  const double by_kv = std::floor(p.kv_tokens / kv_per_request);
  out.queue.servers = static_cast<int32_t>(std::clamp(by_kv, 1.0, double(p.max_batch)));
  out.queue.service_s = service;
  const double sd = std::max(0.0, mix.output_tokens_sd) * p.itl_s;
  out.queue.service_cv2 = (sd * sd) / (service * service);
  out.saturation = out.queue.servers / service;
  out.rate = max_rate(out.queue, ttft_s - out.prefill_s, quantile);
  return out;
}

}  // namespace kvgate::scale
