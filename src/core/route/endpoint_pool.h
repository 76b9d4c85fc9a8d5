// EndpointPool: the endpoints of one model's pool, and the router's load bookkeeping.
//
// Owns the Endpoint records under dense ids (the same ids the kv indexes use; an id is
// reused after remove). The shells drive it:
//   - the control plane: add / remove / set_health, and on_metrics after each scrape;
//   - the data plane, per request: on_routed (Router::commit does it), then
//     on_first_token, then on_finished or on_failed.
// From these it keeps each endpoint's RouterLoad exact: requests in flight, prefill
// tokens not yet computed, KV blocks in use (a shared prefix counted once), and it can
// predict the decode load at a future instant (early rejection).
//
//   EndpointPool pool(16);
//   EndpointId a = pool.add({.url = "http://10.0.0.7:8000", .role = Role::kDecode}, now);
//   pool.on_metrics(a, {.waiting = 2, .running = 10, .kv_usage = 0.4}, now);
//   ...
//   pool.on_first_token(request_id, now);
//   pool.on_finished(request_id, now);
//
// Unknown request or endpoint ids are ignored (return false): a late callback for a
// request whose endpoint was removed is normal, not a bug.
//
// Thread-safety: none; owned by the router's strand.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/route/active_blocks.h"
#include "core/route/endpoint.h"
#include "core/route/latency_predictor.h"
#include "core/route/request.h"

namespace kvgate::route {

// Where a request went and what it costs there; what on_routed records.
struct Placement {
  EndpointId endpoint = 0;                     // decodes (and prefills, unless below)
  std::optional<EndpointId> prefill_endpoint;  // remote prefill, disaggregated only
  std::span<const kv::BlockKey> keys;          // prompt's full-block keys
  uint32_t prompt_tokens = 0;
  uint32_t expected_output_tokens = 0;
  uint32_t prefill_tokens = 0;      // tokens the prefilling endpoint computes
  Nanos predicted_prefill_end = 0;  // absolute time the prefill is predicted done
  // What the latency predictor saw of `endpoint` at routing (Decision::latency_features),
  // kept for Router::on_first_token / on_finished; nullopt when it does not learn.
  std::optional<LatencyFeatures> latency_features;
};

// A request in flight as the pool tracks it.
struct TrackedRequest {
  RequestId id = 0;
  EndpointId endpoint = 0;
  std::optional<EndpointId> prefill_endpoint;
  std::vector<kv::BlockKey> keys;  // held on `endpoint` until the end
  uint32_t private_blocks = 0;     // partial prompt block + expected output blocks
  uint32_t added_blocks = 0;       // blocks it added to the endpoint's count at routing
  uint32_t prefill_tokens = 0;
  uint32_t expected_output_tokens = 0;
  Nanos routed_at = 0;
  Nanos predicted_prefill_end = 0;
  std::optional<Nanos> first_token_at;
  std::optional<LatencyFeatures> latency_features;  // Placement::latency_features
  uint64_t scrape = 0;  // its endpoint's Endpoint::scrapes when it was routed
  // Prefill load released (first token came, or the prefill endpoint was removed).
  bool prefill_done = false;
};

class EndpointPool {
 public:
  // REQUIRES: block_size > 0 (tokens per KV block, to count partial and output blocks).
  explicit EndpointPool(uint32_t block_size);
  ~EndpointPool();
  EndpointPool(const EndpointPool&) = delete;
  EndpointPool& operator=(const EndpointPool&) = delete;

  // --- Membership (control plane) ---

  // Adds an endpoint under the lowest free id. Error when the URL is already in the
  // pool or the pool holds kv::kMaxEndpoints endpoints.
  Result<EndpointId> add(EndpointSpec spec, Nanos now);
  // Removes an endpoint and forgets the requests in flight there (their later
  // callbacks are ignored). The caller must also remove it from the kv indexes
  // (Router::remove_endpoint does both). False when unknown.
  bool remove(EndpointId id);
  bool set_health(EndpointId id, Health health);
  // A scrape came back. Records `metrics` (scraped_at = now) and the router load at
  // this instant, which the scrape already reflects (load.h).
  bool on_metrics(EndpointId id, ScrapedMetrics metrics, Nanos now);
  bool set_kv_capacity(EndpointId id, uint32_t blocks);
  // LoRA placement: what the endpoint holds (Endpoint::lora_placed); nullopt forgets it.
  bool set_lora_placed(EndpointId id, std::optional<LoraPlaced> placed);

  // nullptr when unknown.
  const Endpoint* get(EndpointId id) const;
  std::optional<EndpointId> find(std::string_view url) const;
  // Ids of all endpoints, ascending.
  std::span<const EndpointId> ids() const { return ids_; }
  size_t size() const { return ids_.size(); }
  uint32_t block_size() const { return block_size_; }

  // --- Request lifecycle (data plane) ---

  // Starts tracking a request. Error when the id is already in flight or an endpoint
  // is unknown.
  Status on_routed(RequestId id, const Placement& placement, Nanos now);
  // The first token arrived: the prefill is done (its tokens leave the prefill load;
  // a remote prefill endpoint is done with the request).
  bool on_first_token(RequestId id, Nanos now);
  // The request is served by `to` instead of its endpoint (the Endpoint Picker's data
  // plane tried a fallback after the endpoint failed): what it holds there (in flight,
  // decode blocks, and its prefill tokens unless a remote prefill endpoint has them) moves
  // to `to`, counted as a failure of the old endpoint and a request routed to `to`; it
  // waits in `to`'s queue until its first token. Its latency features are dropped (they
  // were the old endpoint's). True when moved or already there; false for an unknown
  // request or endpoint, or when `to` is the request's remote prefill endpoint.
  bool on_moved(RequestId id, EndpointId to, Nanos now);
  // The request ended normally; releases everything it held.
  bool on_finished(RequestId id, Nanos now);
  // The request failed (upstream error, timeout, client gone); releases like
  // on_finished and counts a failure on the endpoint(s).
  bool on_failed(RequestId id, Nanos now);

  const TrackedRequest* request(RequestId id) const;
  size_t requests_in_flight() const { return requests_.size(); }

  // Leading blocks of `keys` each endpoint's in-flight requests already hold (their
  // decode blocks would be shared, not added).
  void active_prefix(std::span<const kv::BlockKey> keys,
                     std::vector<ActiveBlocks::Prefix>& out) const;
  // Blocks a request of this shape occupies in total: ceil((prompt + expected output)
  // / block_size), at least keys.size().
  uint32_t request_blocks(uint32_t prompt_tokens, uint32_t expected_output_tokens,
                          size_t full_blocks) const;

  // Mooncake-style prediction of the KV blocks `id` will have in use at time `at`:
  // blocks of requests already decoding, plus those of requests still in prefill whose
  // prefill is predicted to end by `at`, minus those of decoding requests predicted to
  // finish by `at` (first token + expected output x decode_seconds_per_token). Returns
  // 0 for an unknown endpoint.
  double predicted_decode_blocks(EndpointId id, Nanos at, double decode_seconds_per_token) const;
  // The decode load now, as the naive early-rejection rule sees it: blocks of requests
  // whose prefill is done (on_first_token: the prefill answer came back), without those
  // still in prefill however soon they are predicted to land. Returns 0 for an unknown
  // endpoint.
  double decode_blocks_now(EndpointId id) const;

 private:
  // A request of r.endpoint left its waiting queue (first token, or it ended without
  // one): it no longer counts in Endpoint::unstarted_since_scrape.
  void note_started(const TrackedRequest& r);
  // The request left its endpoint's queues at `now` (it ended).
  void release(TrackedRequest& request, bool failed, Nanos now);
  // `tokens` more to prefill on `e` from `now` (RouterLoad::prefill_moved_at when its
  // queue was empty).
  void queue_prefill(Endpoint& e, uint32_t tokens, Nanos now);
  // A new entry in requests_ for `id` (not there yet), in a spare node when there is one.
  TrackedRequest& track(RequestId id);
  // Ends `it`'s tracking; its node becomes a spare (up to kMaxSpareNodes).
  void untrack(std::unordered_map<RequestId, TrackedRequest>::iterator it);
  // Blocks held on `e` now, requests still in prefill included (their reservation).
  double held_decode_blocks(const Endpoint& e) const;

  uint32_t block_size_;
  std::vector<std::optional<Endpoint>> slots_;       // by id
  std::vector<EndpointId> ids_;                      // live ids, ascending
  std::vector<std::vector<RequestId>> by_endpoint_;  // requests decoding there, by id
  std::unordered_map<RequestId, TrackedRequest> requests_;
  // Finished requests' nodes (with their keys' capacity), reused by the next on_routed:
  // no allocation per request in the steady state.
  static constexpr size_t kMaxSpareNodes = 256;
  std::vector<std::unordered_map<RequestId, TrackedRequest>::node_type> spare_;
  ActiveBlocks active_;
};

}  // namespace kvgate::route
