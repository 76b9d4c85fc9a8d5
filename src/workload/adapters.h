// LoRA adapters in a simulated workload (issue #40): how many, how popular, and how the
// engines hold them. A scenario's `adapters:` section:
//
//   adapters:
//     count: 50             # adapters lora-0 .. lora-49 (0 or absent: none)
//     popularity: zipf      # zipf | uniform: adapter k (0-based) has weight 1/(k+1)^zipf_s
//     zipf_s: 1.0
//     base_share: 0         # share of the requests that use the base model (0..1)
//     max_loras: 4          # each engine's adapter slots (vLLM's --max-loras)
//     load_ms: 200          # loading an adapter into a slot (the engine waits for it)
//     step_cost: 0.05       # step time +5% per extra distinct adapter in a batch
//     max_replicas: 8       # placement: endpoints one adapter may be loaded on at once
//
// Every request draws its adapter from the simulator's own seeded stream, in arrival
// order, so every policy of an open-loop scenario sees the same adapter per request.
//
//   AdapterPicker picker(spec);
//   const uint32_t a = picker.pick(rng);  // 0: base model, k: spec.name(k - 1)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/rng.h"
#include "core/common/time.h"

namespace kvgate::workload {

struct AdapterSpec {
  enum class Popularity : uint8_t { kZipf, kUniform };

  uint32_t count = 0;  // 0: the workload uses no adapters
  Popularity popularity = Popularity::kZipf;
  double zipf_s = 1.0;
  double base_share = 0;
  uint32_t max_loras = 4;
  Nanos load_time = 200 * kMillisecond;
  double step_cost = 0.05;
  uint32_t max_replicas = 8;

  bool enabled() const { return count > 0; }
  // The name of adapter `index` (0-based): "lora-<index>".
  static std::string name(uint32_t index) { return "lora-" + std::to_string(index); }
};

// Draws adapters by popularity. Cost: O(log count) per draw.
class AdapterPicker {
 public:
  explicit AdapterPicker(const AdapterSpec& spec);
  // 0 for the base model, else 1 + the adapter's index. REQUIRES: spec.enabled().
  uint32_t pick(Rng& rng) const;

 private:
  double base_share_;
  std::vector<double> cdf_;  // cumulative, normalized: cdf_.back() == 1
};

}  // namespace kvgate::workload
