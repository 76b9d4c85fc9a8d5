// PeerReports<T>: what one gateway replica keeps of its peers' last reports, keyed by
// the peer's replica_id: a T per peer and when it was last heard from. A peer silent for
// the timeout is forgotten by expire(). FleetRoom keeps the peers' queued demand in one,
// FleetFairness their sequence numbers and service.
//
//   PeerReports<Demand> peers(15 * kSecond);
//   peers.heard(report.replica, now) = report.demand;  // on a peer's report
//   stats.dead_peers += peers.expire(now);             // now and then
//
// Iteration (begin/end) is in the map's order: with the same reports, heard and expired
// at the same times, the same order, so a deterministic caller stays deterministic.
// Deterministic; thread-safety: none.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/common/time.h"

namespace kvgate::cluster {

template <typename T>
class PeerReports {
 public:
  struct Peer {
    Nanos last_heard = 0;
    T value{};
  };
  using Map = std::unordered_map<std::string, Peer>;

  // A peer silent for `timeout` is forgotten (expire) and is not live.
  explicit PeerReports(Nanos timeout) : timeout_(timeout) {}

  // `replica`'s value (value-initialized when it is new), the peer heard from at `now`.
  T& heard(const std::string& replica, Nanos now) {
    Peer& p = peers_[replica];
    p.last_heard = now;
    return p.value;
  }

  // Forgets the peers silent for the timeout at `now`; returns how many it forgot.
  size_t expire(Nanos now) {
    size_t dead = 0;
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (now - it->second.last_heard >= timeout_) {
        ++dead;
        it = peers_.erase(it);
      } else {
        ++it;
      }
    }
    return dead;
  }

  // The peers heard from within the timeout of `now`.
  size_t live(Nanos now) const {
    size_t n = 0;
    for (const auto& [name, p] : peers_) n += now - p.last_heard < timeout_ ? 1 : 0;
    return n;
  }

  // `replica`'s value, or null when it is not known (never heard, or forgotten).
  const T* find(std::string_view replica) const {
    auto it = peers_.find(std::string(replica));
    return it == peers_.end() ? nullptr : &it->second.value;
  }

  void clear() { peers_.clear(); }
  size_t size() const { return peers_.size(); }
  typename Map::const_iterator begin() const { return peers_.begin(); }
  typename Map::const_iterator end() const { return peers_.end(); }

 private:
  Nanos timeout_;
  Map peers_;
};

}  // namespace kvgate::cluster
