// FlowQueue: the requests of one pool that wait in the gateway while every endpoint is
// saturated, and the order in which they leave.
//
// Three levels of order:
//   1. priority bands, one per Criticality: strict (critical, then standard, then
//      sheddable), or weighted (stride scheduling by band weight) with a starvation
//      bound (a band whose oldest request has waited that long goes next);
//   2. within a band, fairness between tenants, VTC-style (Sheng et al., OSDI 2024): each
//      tenant has a virtual token counter that grows by (prompt x input_weight + output x
//      output_weight) / tenant weight for every request it is served; the backlogged
//      tenant with the lowest counter goes next. A tenant that becomes backlogged after
//      idling has its counter lifted to the lowest counter among the backlogged tenants
//      (or to the last served tenant's counter when none is), so it cannot bank credit;
//   3. within a tenant and band: earliest deadline first among the requests that carry a
//      deadline, then FCFS.
// Opt-in (FlowQueueConfig::targets_first): within a band, a request with a TTFT target
// (Entry::ttft_target) leaves before every request of the band without one, whatever
// their tenants, the one due first (enqueued + target) first; the requests without a
// target keep the order above. Service is charged to each tenant's counter either way.
// Several gateway replicas (cluster/fleet_fairness.h) order by the fleet's counters: the
// service the peers gave a tenant is added to its counter (add_peer_service), and the
// service given here is handed out for the peers (take_service).
// Bounds: pool and tenant limits on queued requests and queued tokens (prompt + expected
// output), a maximum wait per band, and deadlines. On pool overflow the newest request of
// the lowest band below the newcomer's is evicted first; otherwise the newcomer is
// refused (queue_full).
//
// Every operation is O(log n) in the queued requests and tenants: ordered sets per band
// (tenants by counter, requests by arrival, targeted requests by due time), per tenant and
// band (requests by deadline then arrival), and one by deadline.
//
//   FlowQueue q(config);
//   std::vector<FlowQueue::Removed> evicted;
//   auto r = q.enqueue({.id = 7, .tenant = "acme", .band = Criticality::kStandard,
//                       .prompt_tokens = 900, .expected_output_tokens = 100}, now, evicted);
//   ...
//   if (auto next = q.pop(now)) route(next->request);
//
// Deterministic; thread-safety: none (owned by the router's strand).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/route/request.h"
#include "core/route/room_share.h"

namespace kvgate::route {

inline constexpr size_t kBands = 3;  // indexed by Criticality: critical, standard, sheddable

enum class BandOrder : uint8_t { kStrict, kWeighted };
std::string_view to_string(BandOrder order);
std::optional<BandOrder> parse_band_order(std::string_view text);  // strict|weighted

// Which endpoints a request leaving the queue may be routed to: only those with room by
// the queue's measure (kRoom: engines' queues stay short, so the gateway's order is the
// order requests start in), or any the router would pick (kAny: its own saturation
// filter and scorers, so a request may follow its cached prefix into a queue), or those
// with room and, for a request of a backlogged tenant, a full endpoint within the cache
// reserve whose cached prefix makes its prefill end sooner there (kCache;
// FlowQueueConfig::cache_reserve, FlowController).
enum class LateBinding : uint8_t { kRoom, kAny, kCache };
std::string_view to_string(LateBinding binding);
std::optional<LateBinding> parse_late_binding(std::string_view text);  // room|any|cache

// Why a request left the queue (or never entered it) without being routed.
enum class FlowRefusal : uint8_t {
  kNone,
  kQueueFull,           // a limit was reached, or it was evicted for a higher band
  kQueueTimeout,        // waited its band's max_wait
  kDeadlineUnmeetable,  // its deadline passed, or cannot be met given the queue ahead
};
// "ok", "queue_full", "queue_timeout", "deadline_unmeetable".
std::string_view to_string(FlowRefusal refusal);
// 429 queue_full and deadline_unmeetable (come back later, or with a looser deadline),
// 503 queue_timeout (no capacity appeared in time).
int http_status(FlowRefusal refusal);

struct FlowQueueConfig {
  // false: no queue; every request is routed at once (the router's own shedding).
  bool enabled = false;
  // true: a sheddable request that would have to wait is refused (429 saturated, the
  // behaviour without a queue) instead of queued.
  bool shed_sheddable = false;
  BandOrder band_order = BandOrder::kStrict;
  std::array<double, kBands> band_weights{16, 4, 1};  // kWeighted; > 0
  // A band whose oldest request has waited this long is served next, whatever the
  // order; 0 = off.
  Nanos starvation_bound = 0;
  uint32_t max_requests = 10'000;    // pool: queued requests; > 0
  uint64_t max_tokens = 0;           // pool: queued prompt + expected output tokens; 0 = no limit
  uint32_t tenant_max_requests = 0;  // 0 = no limit
  uint64_t tenant_max_tokens = 0;    // 0 = no limit
  // Longest a request may wait, by band; 0 = unbounded (then only deadlines and the
  // shell's drain end the wait).
  std::array<Nanos, kBands> max_wait{30 * kSecond, 30 * kSecond, 30 * kSecond};
  double input_weight = 1;   // w_in: counter cost of a prompt token
  double output_weight = 2;  // w_out: counter cost of an output token
  // Output tokens charged for a request that does not say (max_tokens absent).
  uint32_t default_output_tokens = 256;
  // Requests per endpoint beyond the saturation limit (and into the KV headroom that
  // kv_threshold keeps) that the queue's next request may take when it is sparse: its
  // tenant has nothing else queued while other tenants' requests wait (FlowQueue::peek).
  // A light tenant then does not wait for a place to free behind a heavy one's backlog;
  // 0 = off.
  uint32_t sparse_reserve = 1;
  // Where a request leaving the queue may go (LateBinding); the pool is gated the same
  // way either way: requests leave only while some endpoint has room.
  LateBinding late_binding = LateBinding::kRoom;
  // late_binding cache: requests per endpoint beyond queue_threshold (by the queue's
  // measure of its queue) that requests following their cached prefix may take; the
  // sparse reserve then lies above it. 0: only endpoints full by KV usage alone.
  uint32_t cache_reserve = 1;
  // Behind several gateway replicas that sync: how this replica's queue shares the pool's
  // room with theirs (room_share.h; FlowController::set_room_fleet). kNone: it takes all
  // the room it sees. One replica, sync off or Redis away: the whole room whatever this says.
  RoomShare room_share = RoomShare::kSplit;
  // true: within a band, the requests with a TTFT target leave first, the one due first
  // (enqueued + target) first, whatever their tenants; those without a target wait behind
  // them in the usual order (VTC between tenants, then EDF/FCFS). Service is charged to
  // each tenant's counter as always. false: targets play no part in the order.
  bool targets_first = false;
  // Prompt tokens routed to an endpoint whose first token has not come yet (its prefill
  // still queued or under way: the router's own count, Endpoint::load.active_prefill_tokens)
  // at which the endpoint has no room for a request leaving the queue, whatever its queue
  // length and KV usage; 0 = off. A request released behind a long prefill waits inside the
  // engine for it, where no order applies; held back here, it waits in the queue, where
  // targets_first lets a targeted request pass it. The reserves (sparse, cache) ignore it.
  uint64_t prefill_threshold = 0;

  // Error naming the first field out of range.
  Status validate() const;
};

// Applies flat "key" = "value" entries (what a YAML `flow_control:` map flattens to):
//   enabled, shed_sheddable (true|false), band_order (strict|weighted),
//   band_weights.{critical,standard,sheddable}, starvation_bound (seconds),
//   max_requests, max_tokens, tenant_max_requests, tenant_max_tokens,
//   max_wait.{critical,standard,sheddable} (seconds, 0 = unbounded),
//   input_weight, output_weight, default_output_tokens, sparse_reserve,
//   late_binding (room|any|cache), cache_reserve, room_share (split|demand|none),
//   targets_first (true|false), prefill_threshold (tokens, 0 = off).
// Error naming the key on an unknown key or a malformed value; `config` may then be
// partly changed. Does not validate().
Status apply_flow_entries(std::span<const std::pair<std::string, std::string>> entries,
                          FlowQueueConfig& config);

// Per-tenant figures (a tenant is known from its first request on, and stays).
struct FlowTenantStats {
  std::string_view name;
  double weight = 1;
  double counter = 0;  // virtual token counter
  std::array<uint32_t, kBands> queued{};
  uint64_t queued_tokens = 0;
  uint64_t dispatched = 0;
  uint64_t evicted = 0;    // evicted for a higher band, or refused at a limit
  uint64_t timed_out = 0;  // queue_timeout
  uint64_t deadline_missed = 0;
  uint64_t served_tokens = 0;  // prompt + output charged (output corrected at the end)
  double peer_service = 0;     // counter units the peers' service added (fleet fairness)
};

class FlowQueue {
 public:
  struct Entry {
    RequestId id = 0;
    std::string_view tenant;
    double weight = 1;  // the tenant's weight (the newest given wins); > 0
    Criticality band = Criticality::kStandard;
    uint32_t prompt_tokens = 0;
    uint32_t expected_output_tokens = 0;  // 0: default_output_tokens
    std::optional<Nanos> deadline;        // absolute; EDF within the tenant
    // Time to first token it is to meet, from now (RouteRequest::ttft_target); 0: none.
    // With targets_first, due at now + ttft_target and ahead of the untargeted.
    Nanos ttft_target = 0;
    const RouteRequest* request = nullptr;  // borrowed, handed back by pop()
  };
  // A request that left the queue.
  struct Removed {
    RequestId id = 0;
    const RouteRequest* request = nullptr;
    std::string_view tenant;  // valid as long as the queue
    Criticality band = Criticality::kStandard;
    Nanos enqueued_at = 0;
    uint32_t charged_output_tokens = 0;  // pop(): what the counter was charged for output
    FlowRefusal refusal = FlowRefusal::kNone;
  };
  // The next request of one tenant in one band (admin view).
  struct HeadView {
    Criticality band = Criticality::kStandard;
    std::string_view tenant;
    RequestId id = 0;
    Nanos enqueued_at = 0;
    double counter = 0;
  };

  // REQUIRES: config.validate() ok.
  explicit FlowQueue(FlowQueueConfig config);
  ~FlowQueue();
  FlowQueue(const FlowQueue&) = delete;
  FlowQueue& operator=(const FlowQueue&) = delete;

  const FlowQueueConfig& config() const { return config_; }
  // Limits and weights change at once; requests already queued stay (even above a
  // lowered limit). REQUIRES: config.validate() ok.
  void set_config(FlowQueueConfig config);

  // Queues `e` at `now` (nondecreasing across calls), or refuses it: kQueueFull at a
  // limit, kDeadlineUnmeetable when its deadline is not after now plus the wait the
  // queue ahead of it predicts (from the measured dispatch rate). Requests evicted to
  // make room are appended to `evicted` (refusal kQueueFull). A duplicate id is refused
  // (kQueueFull) and changes nothing.
  FlowRefusal enqueue(const Entry& e, Nanos now, std::vector<Removed>& evicted);
  // The request pop(now) would return, left in the queue; nullopt when empty. `sparse`:
  // its tenant has no other request queued while other tenants have (a light tenant's
  // request behind others' backlog, FQ-CoDel's "new flow"). `backlogged`: its tenant has
  // other requests queued behind it (it arrives faster than it is served).
  struct Next {
    RequestId id = 0;
    const RouteRequest* request = nullptr;
    bool sparse = false;
    bool backlogged = false;
  };
  std::optional<Next> peek(Nanos now) const;
  // The next request in order, removed and charged to its tenant; nullopt when empty.
  std::optional<Removed> pop(Nanos now);
  // A request that leaves without being dispatched (client gone); false when unknown.
  bool remove(RequestId id);
  // Requests whose band's max_wait or whose deadline ran out by `now`, appended to `out`.
  void expire(Nanos now, std::vector<Removed>& out);
  // When the next request will expire; nullopt when none can.
  std::optional<Nanos> next_expiry() const;

  // Service given to a tenant outside the queue (dispatched at once): charged like a pop.
  void charge(std::string_view tenant, double weight, uint32_t prompt_tokens,
              uint32_t output_tokens, Nanos now);
  // The request ended with `actual` output tokens where `charged` were counted: the
  // counter is corrected by the difference (VTC counts actual service).
  void correct_output(std::string_view tenant, uint32_t charged, uint32_t actual);
  // The output tokens a request is charged for when dispatched.
  uint32_t output_tokens_charged(uint32_t expected) const {
    return expected > 0 ? expected : config_.default_output_tokens;
  }

  // --- Fleet fairness (cluster/fleet_fairness.h): several replicas, one order. ---
  // Service is what pop(), charge() and correct_output() add to a counter (cost divided
  // by the tenant's weight); lifts are not service and stay this replica's own.
  // From now on, notes the service given here per tenant for take_service (off by
  // default: a single replica pays nothing for it).
  void track_service(bool on) { track_service_ = on; }
  // Appends (tenant, service given here since the last call) for each tenant served or
  // corrected since, and starts over. Names are valid as long as the queue.
  void take_service(std::vector<std::pair<std::string_view, double>>& out);
  // Service other replicas gave `tenant` (counter units; negative when a peer corrected
  // a charge down): added to its counter as service here would be, so that the order is
  // by the fleet's service. It is no service here: the round robin among equals and the
  // floor of a returning tenant are this replica's. A tenant not known yet is created
  // where the service is now, as on its first request.
  void add_peer_service(std::string_view tenant, double service);

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  uint64_t queued_tokens() const { return tokens_; }
  size_t band_size(Criticality band) const { return bands_[index(band)].by_seq.size(); }
  uint64_t band_tokens(Criticality band) const { return bands_[index(band)].tokens; }
  bool contains(RequestId id) const { return entries_.count(id) > 0; }
  // Dispatches per second, exponentially averaged (10 s); 0 before the first.
  double dispatch_rate(Nanos now) const;

  // Every tenant seen, in name order.
  std::vector<FlowTenantStats> tenants() const;
  // Per band in band order, each backlogged tenant's next request, lowest counter first;
  // at most `limit` in all. The tenant order only: with targets_first, a band's targeted
  // requests leave before what this lists.
  std::vector<HeadView> head(size_t limit) const;

 private:
  struct Tenant;
  struct Item;
  struct ItemOrder {
    bool operator()(const Item* a, const Item* b) const;
  };
  struct ItemSeq {
    bool operator()(const Item* a, const Item* b) const;
  };
  struct ItemDeadline {
    bool operator()(const Item* a, const Item* b) const;
  };
  struct ItemDue {
    bool operator()(const Item* a, const Item* b) const;
  };
  struct TenantKey {
    double counter;
    // On a counter tie, the tenant served least recently goes first (round robin among
    // equals; a tenant back from idle, lifted to the others' counter, wins), then the
    // one backlogged longest in the band.
    uint64_t served_at;  // the tenant's last service, in service order; 0: never
    uint64_t since;      // when it became backlogged in the band
    Tenant* tenant;
    bool operator<(const TenantKey& o) const;
  };
  static constexpr Nanos kNoDeadline = std::numeric_limits<Nanos>::max();
  using TenantSet = std::set<TenantKey>;
  using OrderSet = std::set<Item*, ItemOrder>;
  using SeqSet = std::set<Item*, ItemSeq>;
  using DeadlineSet = std::set<Item*, ItemDeadline>;
  using DueSet = std::set<Item*, ItemDue>;
  // One queued request, and where it sits in each ordered set (erased in O(1)).
  struct Item {
    RequestId id = 0;
    Tenant* tenant = nullptr;
    size_t band = 0;
    uint32_t prompt_tokens = 0;
    uint32_t output_tokens = 0;  // charged
    uint64_t tokens = 0;         // prompt + output: what the token limits count
    Nanos enqueued_at = 0;
    Nanos deadline = kNoDeadline;
    bool targeted = false;  // has a TTFT target: in its band's `targeted`
    Nanos due = 0;          // targeted: enqueued_at + its TTFT target
    uint64_t seq = 0;
    const RouteRequest* request = nullptr;
    OrderSet::iterator in_tenant;
    SeqSet::iterator in_band;
    DeadlineSet::iterator in_deadline;  // when it has a deadline
    DueSet::iterator in_due;            // when targeted
  };
  struct Band {
    TenantSet tenants;  // backlogged tenants, lowest counter first
    SeqSet by_seq;      // arrival order: oldest times out, newest is evicted
    // Requests with a TTFT target, due first first. Kept whatever targets_first says (so
    // that set_config may turn it on or off); consulted only when it is on.
    DueSet targeted;
    uint64_t tokens = 0;
    double pass = 0;  // kWeighted: stride scheduling
  };

  static size_t index(Criticality c) { return static_cast<size_t>(c); }
  Tenant& tenant(std::string_view name);
  // Takes `item` out of every structure and entries_ (tenant keys adjusted).
  Removed unlink(Item* item, FlowRefusal refusal);
  // The band to serve next; kBands when all are empty.
  size_t pick_band(Nanos now) const;
  // The request band `b` (not empty) serves next: with targets_first its targeted request
  // due first, if any; else the next of its lowest-counter tenant.
  Item* next_in(size_t b) const;
  void set_counter(Tenant& t, double counter);
  // Charges `cost` (already divided by the weight) to `t` as one service given now.
  void serve(Tenant& t, double cost);
  // Notes `service` (counter units) given to `t` here, for take_service.
  void note_service(Tenant& t, double service);
  double cost(uint32_t prompt, uint32_t output) const;
  void note_dispatch(Nanos now);
  Nanos expiry_of(const Item& item) const;

  FlowQueueConfig config_;
  using ItemMap = std::unordered_map<RequestId, Item>;
  ItemMap entries_;  // node-based: an Item's address is stable
  // Nodes of dequeued requests and of their set entries, reused by the next enqueue:
  // no allocation per request in the steady state.
  static constexpr size_t kMaxSpare = 1024;
  std::vector<ItemMap::node_type> spare_items_;
  std::vector<OrderSet::node_type> spare_order_;
  std::vector<SeqSet::node_type> spare_seq_;
  std::vector<DeadlineSet::node_type> spare_deadline_;
  std::vector<DueSet::node_type> spare_due_;
  std::unordered_map<std::string, std::unique_ptr<Tenant>> tenants_;
  std::array<Band, kBands> bands_;
  DeadlineSet by_deadline_;
  uint64_t tokens_ = 0;
  uint64_t seq_ = 0;
  double last_counter_ = 0;  // the last served tenant's counter (a returning tenant's floor)
  uint64_t services_ = 0;    // services given (pop and charge): the order of served_at
  double rate_ = 0;          // decayed dispatch count / tau, at rate_at_
  Nanos rate_at_ = 0;
  bool track_service_ = false;
  std::vector<Tenant*> service_changed_;  // tenants with service not yet taken
};

}  // namespace kvgate::route
