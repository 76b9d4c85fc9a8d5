// Reconciler: what endpoint discovery does to a pool, decided in one pure place.
//
// Every source (a file, DNS, Kubernetes; src/discovery/) reports the whole set of
// endpoints it sees now, or an error. The reconciler keeps each source's last good set,
// merges them (an endpoint is wanted while any source reports it ready) and answers
// with the actions that bring the pool there, in order:
//
//   kAdd      a new endpoint: the pool adds it (warm-up and KV events follow)
//   kSuspend  it vanished: taken out of routing at once, but kept in the router with its
//             index entries for the grace period (a pod that restarts or a DNS answer
//             that misses it once comes back without losing what it had cached)
//   kResume   it came back within the grace period: routable again, entries intact
//   kRemove   gone for the grace period, or reported with a different spec (then a
//             kAdd with the new spec follows): drained, then removed
//
// A source that suddenly reports an empty set after a non-empty one is held (nothing
// changes) unless `hold_empty` is off or `hold_empty_max` has passed since; a source
// that reports an error keeps its last good set. Both are counted.
//
// Deterministic and single-threaded: `now` is passed in, ties go by URL. The shell
// (gateway/control/pool_discovery.h) calls report()/tick() and applies the actions.
//
//   Reconciler r({.grace = 30 * kSecond});
//   size_t dns = r.add_source("dns");
//   std::vector<Action> todo = r.report(dns, now, endpoints);   // apply in order
//   todo = r.tick(now + 31 * kSecond);                           // grace expiries
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/time.h"
#include "core/route/endpoint.h"

namespace kvgate::discovery {

// Where an endpoint's engine publishes KV cache events (vLLM's ZmqEventPublisher).
struct KvEventsAddress {
  std::string publisher;  // tcp://host:port
  std::string replay;     // empty: no replay
  std::string topic;
  bool operator==(const KvEventsAddress&) const = default;
};

struct DiscoveredEndpoint {
  route::EndpointSpec spec;  // spec.url identifies it
  std::optional<KvEventsAddress> kv_events;
  // False: the source knows it but it must not take traffic (a pod not Ready, or
  // terminating). Treated as absent.
  bool ready = true;
};

// Same URL, role, zone, rack, labels, capacity and KV events address.
bool same_endpoint(const DiscoveredEndpoint& a, const DiscoveredEndpoint& b);

struct ReconcilerConfig {
  Nanos grace = 30 * kSecond;  // vanished -> removed; 0: removed at once
  bool hold_empty = true;      // a sudden empty report is not believed...
  Nanos hold_empty_max = 0;    // ...until this long after it began; 0: never
};

struct Action {
  enum class Kind : uint8_t { kAdd, kSuspend, kResume, kRemove };
  Kind kind = Kind::kAdd;
  DiscoveredEndpoint endpoint;  // the full endpoint for kAdd; the URL for the others
  std::string source;           // the source whose report (or grace) caused it
};
std::string_view to_string(Action::Kind kind);

struct SourceStats {
  uint64_t reports = 0;             // good reports (full sets) taken
  uint64_t errors = 0;              // failed reads/answers/watches: last good set kept
  uint64_t changes = 0;             // actions this source caused
  uint64_t resync_differences = 0;  // endpoints a resync found different from the set
                                    // the source held (a watch that missed events)
  uint64_t held_empty = 0;          // empty reports held
  Nanos last_success = -1;          // `now` of the last good report; -1: none yet
  Nanos last_error = -1;
  std::string last_error_message;
  size_t endpoints = 0;  // in its last good set (ready ones)
};

// One endpoint as discovery sees it (the admin view).
struct EntryView {
  std::string url;
  std::vector<std::string> sources;  // reporting it ready now
  bool suspended = false;
  Nanos missing_since = -1;  // while suspended
};

class Reconciler {
 public:
  explicit Reconciler(ReconcilerConfig config);

  // REQUIRES: fewer than 64 sources; unique names.
  size_t add_source(std::string name);
  const std::string& source_name(size_t source) const { return sources_.at(source).name; }
  size_t sources() const { return sources_.size(); }

  // A full set from `source` (duplicates by URL: the first wins). `resync`: the set comes
  // from a periodic full read that should find nothing new; every difference from the
  // source's previous set is counted in resync_differences.
  std::vector<Action> report(size_t source, Nanos now, std::vector<DiscoveredEndpoint> set,
                             bool resync = false);
  // The source could not say: its last good set stays.
  void report_error(size_t source, Nanos now, std::string message);
  // Grace periods that ran out by `now`.
  std::vector<Action> tick(Nanos now);
  // When tick() next has something to do; nullopt: nothing suspended.
  std::optional<Nanos> next_deadline() const;
  // The pool refused a kAdd (e.g. the URL is already there from the config or the admin
  // API): forgotten, so a later report tries again.
  void add_failed(const std::string& url);

  const SourceStats& stats(size_t source) const { return sources_.at(source).stats; }
  std::vector<EntryView> entries() const;
  // The source that brought `url` in ("" when discovery does not own it).
  std::string owner(std::string_view url) const;

 private:
  struct Source {
    std::string name;
    std::map<std::string, DiscoveredEndpoint, std::less<>> set;  // ready ones, by URL
    bool had_endpoints = false;
    Nanos empty_since = -1;  // while an empty report is being held
    SourceStats stats;
  };
  struct Entry {
    DiscoveredEndpoint endpoint;  // as in the pool
    size_t owner = 0;             // the source that added it
    bool suspended = false;
    Nanos missing_since = -1;
  };
  void reconcile(const std::string& url, size_t cause, Nanos now, std::vector<Action>& out);
  void emit(std::vector<Action>& out, Action::Kind kind, const DiscoveredEndpoint& e, size_t cause);

  const ReconcilerConfig config_;
  std::vector<Source> sources_;
  std::map<std::string, Entry, std::less<>> entries_;  // endpoints discovery put in the pool
};

}  // namespace kvgate::discovery
