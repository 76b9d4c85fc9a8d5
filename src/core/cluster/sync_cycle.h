// SyncCycle: when a replica in `sync_mode: cycle` runs its next publish-and-read cycle
// (docs/replicas.md, "One cycle per tick"). A cycle publishes the replica's pending
// Outbox batches and reads the peers' entries in one round trip; between cycles nothing
// of sync wakes the replica, however many peers publish. The cycles run every `tick`
// while anything moves; a cycle that moved nothing (no event or report published or
// read: heartbeats do not count) doubles the wait before the next, up to `idle_max`, and
// the first event snaps it back: an own event at once (woken()), a peer's at the next
// cycle that reads it. An own event that fills a batch brings the next cycle forward,
// never nearer than `min_gap` to the start of the previous one.
//
//   SyncCycle cycle({.tick = 25 * kMillisecond, .min_gap = 5 * kMillisecond,
//                    .idle_max = 100 * kMillisecond});
//   cycle.started(now);                            // then XADD + XREAD, pipelined
//   Nanos next = cycle.done(now, moved, full);     // the reply came: arm the next
//   if (auto at = cycle.woken(now, full)) arm(*at) // an own event: arm it if sooner
//
// Deterministic (time is passed in); thread-safety: none (the Redis executor's).
#pragma once

#include <cstdint>
#include <optional>

#include "core/common/time.h"

namespace kvgate::cluster {

class SyncCycle {
 public:
  struct Options {
    Nanos tick = 25 * kMillisecond;      // between cycles while anything moves
    Nanos min_gap = 5 * kMillisecond;    // a full batch's cycle comes no nearer the last
    Nanos idle_max = 25 * kMillisecond;  // the longest wait while idle (<= tick: fixed)
  };

  explicit SyncCycle(Options options);

  // A cycle starts at `now` (its publish and read are sent).
  void started(Nanos now);
  // The cycle started last is done at `now`: `moved` when it published or read an event
  // or a report (not a heartbeat), `more` when a read came back full (more is waiting:
  // the next cycle runs at once). Returns when the next cycle runs: the current wait
  // after the last start (snapped back to `tick` when this cycle moved something or an
  // own event came meanwhile, else doubled up to `idle_max`), or sooner when an own
  // event asked for it during the cycle (woken()); never before `now`.
  Nanos done(Nanos now, bool moved, bool more = false);
  // An own event came at `now`: the first into an empty Outbox, or one that filled a
  // batch (`full`). The wait snaps back to `tick`. Returns the time the next cycle must
  // run by (the caller keeps the sooner of it and the one armed): `tick` after the last
  // start, `min_gap` after it for a full batch, never before `now`. While a cycle is in
  // flight, nullopt: done() takes it into account.
  std::optional<Nanos> woken(Nanos now, bool full);

  // The time an own event asked the next cycle for while one was in flight (woken()
  // returned nullopt), until done(). A replica that takes a cycle's replies at the next
  // cycle (deferred replies) looks at them by then.
  std::optional<Nanos> pending_wake() const { return wake_at_; }
  // When the cycle in flight's replies are due to be looked at with deferred replies:
  // the current wait after its start (done() then says when the next one runs).
  Nanos reply_due() const { return last_start_ + wait_; }

  // The current wait between cycles (`tick`, or longer while idle).
  Nanos wait() const { return wait_; }
  // Times the wait snapped back from a lengthened one to `tick`.
  uint64_t snaps() const { return snaps_; }
  bool in_flight() const { return in_flight_; }
  const Options& options() const { return options_; }

 private:
  void snap();

  Options options_;
  Nanos wait_;
  Nanos last_start_ = 0;
  bool in_flight_ = false;
  std::optional<Nanos> wake_at_;  // an own event's deadline that came during a cycle
  uint64_t snaps_ = 0;
};

}  // namespace kvgate::cluster
