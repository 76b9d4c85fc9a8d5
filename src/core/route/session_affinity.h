// SessionAffinity: which endpoint each conversation was last routed to, so that its next
// turn goes back there (its KV, the previous turns, is most likely still cached there)
// even when the prefix index cannot tell: an approximate index that aged the prefix out,
// a cold index after a restart, a precise index whose events lag.
//
// A session is a 64-bit key (session_key(): the hash of the session header's value and
// the model). The table is bounded: `capacity` bindings at most, the least recently used
// going first, and a binding idle longer than `idle_ttl` is forgotten when next looked
// at. Memory: about 80 bytes per binding (a 32-byte slot plus a hash-map node and
// bucket), so about 8 MB for the default 100k.
//
// The router owns one per pool (RouterConfig::session_affinity), looks the session up in
// Router::decide and binds it in Router::commit, for its own decisions and for the peers'
// (cluster/peer_sync.h), so that gateway replicas share the bindings. keeps_session() is
// the load bound.
//
//   SessionAffinity t(100'000, 1800 * kSecond);
//   t.bind(session_key("conv-42", "llama"), endpoint, now);
//   std::optional<EndpointId> e = t.find(session_key("conv-42", "llama"), later);
//
// Deterministic given its calls (time is passed in). Thread-safety: none (the router's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/common/index_list.h"
#include "core/common/time.h"
#include "core/route/config.h"
#include "core/route/endpoint.h"

namespace kvgate::route {

// The key of session `value` for `model` (a session header's value is the client's; the
// same value for two models is two sessions). Never 0 (0 means "no session").
uint64_t session_key(std::string_view value, std::string_view model);
// The same for a numeric session id (the simulator's workload sessions).
uint64_t session_key(uint64_t id);

// The load bound: whether a session stays on its endpoint, whose requests in flight are
// `bound_load`, when the least loaded candidate has `least_load`. It leaves only when
// both bounds are exceeded (config.h, SessionAffinityConfig).
bool keeps_session(double bound_load, double least_load, const SessionAffinityConfig& config);

class SessionAffinity {
 public:
  // REQUIRES: capacity > 0, idle_ttl >= 0 (0: bindings never expire).
  SessionAffinity(size_t capacity, Nanos idle_ttl);

  // The endpoint `session` is bound to, or nullopt (never bound, evicted, or idle longer
  // than idle_ttl at `now`). Does not count as a use and changes nothing: an idle
  // binding is dropped by a later bind (the cold end's sweep, or the session's rebind).
  std::optional<EndpointId> find(uint64_t session, Nanos now) const;
  // Binds `session` to `endpoint` (a new binding, a rebind, or the same one refreshed),
  // used at `now`. When the table is full the least recently used binding goes.
  void bind(uint64_t session, EndpointId endpoint, Nanos now);
  // Drops every binding to `endpoint` (it left the pool; its id may be reused). O(size).
  void forget_endpoint(EndpointId endpoint);

  void set_idle_ttl(Nanos idle_ttl) { idle_ttl_ = idle_ttl; }
  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }

  struct Stats {
    uint64_t bound = 0;    // new bindings
    uint64_t rebound = 0;  // bindings moved to another endpoint
    uint64_t evicted = 0;  // dropped for room
    uint64_t expired = 0;  // dropped for idling past idle_ttl
  };
  const Stats& stats() const { return stats_; }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Slot {
    uint64_t session = 0;
    Nanos last_used = 0;
    EndpointId endpoint = 0;
    uint32_t prev = kNil;  // toward the most recently used
    uint32_t next = kNil;  // toward the least recently used
  };
  bool expired(const Slot& s, Nanos now) const {
    return idle_ttl_ > 0 && now - s.last_used > idle_ttl_;
  }
  void unlink(uint32_t i);
  void push_front(uint32_t i);
  void drop(uint32_t i);

  const size_t capacity_;
  Nanos idle_ttl_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::unordered_map<uint64_t, uint32_t> index_;  // session -> slot
  IndexList lru_;  // head: the most recently used; tail: the least recently used
  Stats stats_;
};

}  // namespace kvgate::route
