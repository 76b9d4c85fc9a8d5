// Capacity from a queueing model: how many requests/s one replica takes while meeting a
// TTFT target, from its profiled speed and the request mix the gateway observes.
//
// A replica of a continuous-batching engine is modelled as an M/G/c queue:
//   - c servers: the sequences it can run at once, bounded by its KV cache
//     (kv_tokens / KV a request holds on average: its prompt plus half its output; a
//     cached prefix saves prefill, not KV) and by its batch limit (max_num_seqs);
//   - service time S = the uncached prompt / prefill tokens/s + output tokens x ITL;
//     its squared coefficient of variation cs2 from the output length's spread;
//   - Poisson arrivals at rate lambda.
// A request's TTFT is its wait for a free sequence slot plus its prefill. The wait tail
// is M/M/c's, P(W > t) = C(c, a) exp(-(c mu - lambda) t), stretched by Allen-Cunneen's
// factor (1 + cs2) / 2 for service times less (or more) variable than exponential:
//     P(W > t) ~= C(c, a) exp(-2 (c mu - lambda) t / (1 + cs2)),   a = lambda / mu.
// max_rate() is the highest lambda with P(TTFT > target) <= 1 - quantile. The pool's
// replicas each get lambda / n of the load (the router spreads it), so the pool needs
// ceil(load / max_rate) replicas. docs/autoscaler.md ("Capacity") checks it against
// the simulator's measured knee; erlang_c against textbook values.
//
//   ReplicaCapacity cap = replica_capacity(profile, mix, /*ttft_s=*/1.0, /*quantile=*/0.99);
//   int32_t replicas = ceil_count(load / cap.rate);
//
// Pure functions.
#pragma once

#include <cstdint>

namespace kvgate::scale {

// Probability that an arrival has to wait in M/M/c with `servers` servers and an offered
// load of `offered` erlangs (lambda / mu). 1 when offered >= servers; 0 when offered <= 0.
// REQUIRES: servers >= 1.
double erlang_c(int32_t servers, double offered);

struct QueueModel {
  int32_t servers = 1;
  double service_s = 1;    // mean service time
  double service_cv2 = 1;  // squared coefficient of variation (1: exponential, 0: fixed)
};

// P(wait > t_s) at `rate` arrivals/s; 1 at or beyond saturation.
double wait_exceeds(const QueueModel& m, double rate, double t_s);

// The highest arrival rate with P(wait > t_s) <= 1 - quantile (0 if none; REQUIRES
// quantile in (0, 1)). Found by bisection to 1e-4 of the saturation rate.
double max_rate(const QueueModel& m, double t_s, double quantile);

// What one replica can do, measured in advance (the engine's profile).
struct ReplicaProfile {
  double prefill_tokens_per_s = 40000;  // prompt tokens/s while prefilling
  double itl_s = 0.008;                 // inter-token latency at a full batch
  double kv_tokens = 32768;             // KV cache, tokens
  int32_t max_batch = 256;              // concurrent sequences (max_num_seqs)
};

// The request mix the gateway observes.
struct RequestMix {
  double prompt_tokens = 0;
  double output_tokens = 0;
  double output_tokens_sd = 0;  // spread of the output length
  double prefix_hit_rate = 0;   // fraction of prompt tokens found in the prefix cache
};

struct ReplicaCapacity {
  double rate = 0;        // requests/s one replica takes within the target
  double saturation = 0;  // c / S: requests/s at which its queue grows without bound
  QueueModel queue;
  double prefill_s = 0;  // prefill of one uncached prompt
};

// REQUIRES: profile fields > 0, quantile in (0, 1). A mix with no measurement yet (zero
// tokens) yields servers = max_batch and a one-token service.
ReplicaCapacity replica_capacity(const ReplicaProfile& profile, const RequestMix& mix,
                                 double ttft_s, double quantile);

}  // namespace kvgate::scale
