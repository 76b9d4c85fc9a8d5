// RouteRequest: what the router needs to know about one request to place it.
//
// The gateway fills it after tokenizing (block keys from kv::hash_blocks), the simulator
// from its workload. The router only borrows it for the duration of route().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/common/time.h"
#include "core/kv/block_hash.h"
#include "core/kv/prefix_index.h"

namespace kvgate::route {

// Caller-chosen id, unique among requests in flight; the lifecycle calls use it.
using RequestId = uint64_t;

// How much a request may be delayed or dropped (Gateway API Inference Extension):
// critical requests are never shed, standard ones are not shed either but avoid
// saturated endpoints only through the policy, sheddable ones are rejected when every
// candidate endpoint is saturated.
enum class Criticality : uint8_t { kCritical, kStandard, kSheddable };

std::string_view to_string(Criticality c);
// "critical" | "standard" | "sheddable"; nullopt for anything else.
std::optional<Criticality> parse_criticality(std::string_view text);
// Integer priorities (the Inference Extension's newer form): > 0 critical, 0 standard,
// < 0 sheddable.
Criticality criticality_from_priority(int priority);

struct RouteRequest {
  RequestId id = 0;
  // Chained keys of the prompt's full blocks (kv::hash_blocks with the pool's block
  // size). May be empty (short prompt, or a policy that ignores the prefix).
  std::span<const kv::BlockKey> keys;
  uint32_t prompt_tokens = 0;  // all prompt tokens, including a trailing partial block
  // Tokens the answer is expected to have (max_tokens, or a predicted length); 0 when
  // unknown. Counted in the request's KV blocks and in early rejection's prediction.
  uint32_t expected_output_tokens = 0;
  Criticality criticality = Criticality::kStandard;
  // Endpoints this request must not go to (a retry skips the ones that failed it); the
  // healthy filter, which always runs first, drops them.
  std::span<const kv::EndpointId> excluded;
  // An endpoint that holds state of this request's own (a Responses API conversation's
  // previous response: the engine's stored response and its KV). Aggregated pools only:
  // chosen when it is still a candidate after the filters and early rejection (healthy,
  // not excluded, room for the request); otherwise the policy decides as if unset.
  std::optional<kv::EndpointId> preferred;
  // The request's LoRA adapter ("" for the base model). Aggregated pools only, after the
  // filters: the candidates where the adapter is active (per vllm:lora_requests_info, or
  // loaded per the placement) if any, else those with a free slot, else every candidate
  // (each must evict another adapter); load and cache decide within that tier. In a pool
  // that places adapters (Endpoint::lora_placed), only the endpoints that have it loaded
  // are candidates while one is, else those loading it, else every endpoint.
  std::string_view adapter;
  // The request's conversation (session_key() of the session header's value; 0: none).
  // When the pool keeps session affinity (RouterConfig::session_affinity), aggregated
  // pools only, after the filters, early rejection and the LoRA tiers: the endpoint the
  // session is bound to, while it is a candidate within the load bound (and, with
  // targets below and latency_targets on, predicted to meet them); else the policy
  // decides. commit() binds the session to the endpoint chosen.
  uint64_t session = 0;
  // How many runners-up the decision lists after its endpoint (Decision::runners_up, at
  // most Decision::kMaxRunnersUp): the Endpoint Picker's fallbacks. 0: none.
  uint8_t runners_up = 0;

  // Latency targets: time to first token after routing and mean time per output token;
  // 0 = none. Honoured when the router's latency_targets are enabled (config.h,
  // LatencyTargetsConfig), ignored by the router otherwise; the flow queue orders by the
  // TTFT target either way when FlowQueueConfig::targets_first is set. The gateway fills them from
  // the request's x-kvgate-ttft-ms / x-kvgate-tpot-ms (or llm-d's x-slo-*) headers or the tenant's
  // defaults; the simulator from the workload's `targets`.
  Nanos ttft_target = 0;
  Nanos tpot_target = 0;
  // Set by the flow controller on a request leaving its queue: it has waited, so when no
  // endpoint meets its targets it goes where predicted fastest (SloAction::kQueue).
  bool dequeued = false;

  bool has_targets() const { return ttft_target > 0 || tpot_target > 0; }
};

}  // namespace kvgate::route
