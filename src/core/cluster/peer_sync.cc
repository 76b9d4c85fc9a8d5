#include "core/cluster/peer_sync.h"

#include <algorithm>

namespace kvgate::cluster {

Outbox::Outbox(std::string replica, std::string pool) {
  batch_.replica = std::move(replica);
  batch_.pool = std::move(pool);
}

void Outbox::routed(const route::RouteRequest& request, const route::Decision& decision,
                    std::string_view endpoint_url, std::string_view prefill_url, Nanos now) {
  if (batch_.events.empty()) oldest_ = now;
  ++requests_;
  RoutingEvent& e = batch_.events.emplace_back();
  e.kind = EventKind::kRouted;
  e.request = request.id;
  e.endpoint = endpoint_url;
  if (decision.prefill_endpoint) e.prefill_endpoint = prefill_url;
  const size_t n = std::min(request.keys.size(), max_keys);
  e.keys.assign(request.keys.begin(), request.keys.begin() + static_cast<ptrdiff_t>(n));
  e.prompt_tokens = request.prompt_tokens;
  e.expected_output_tokens = request.expected_output_tokens;
  e.prefill_tokens = decision.prefill_tokens;
  e.predicted_prefill = decision.predicted_prefill;
  e.session = request.session;
}

void Outbox::load(EventKind kind, uint64_t request, Nanos now, uint32_t output_tokens) {
  if (batch_.events.empty()) oldest_ = now;
  batch_.events.push_back(RoutingEvent::load(kind, request, output_tokens));
}

bool Outbox::due(Nanos now, const FlushRule& rule) const {
  if (batch_.events.empty()) return false;
  return requests_ >= rule.batch || rule.waited(oldest_, now);
}

std::optional<Nanos> Outbox::due_at(const FlushRule& rule) const {
  if (batch_.events.empty()) return std::nullopt;
  if (requests_ >= rule.batch) return oldest_;
  return oldest_ + std::max<Nanos>(0, rule.max_wait - rule.period);
}

std::optional<EventBatch> Outbox::take(Nanos now, bool heartbeat) {
  if (batch_.events.empty() && !heartbeat) return std::nullopt;
  EventBatch out;
  out.replica = batch_.replica;
  out.pool = batch_.pool;
  out.seq = next_seq_++;
  out.age = batch_.events.empty() ? 0 : std::max<Nanos>(0, now - oldest_);
  out.events.swap(batch_.events);
  requests_ = 0;
  return out;
}

PeerSync::PeerSync(route::Router& router, std::string self, Options options)
    : router_(router), self_(std::move(self)), options_(options) {}

void PeerSync::apply(const EventBatch& batch, Nanos now) {
  if (batch.replica == self_) return;
  Peer& peer = peers_[batch.replica];
  ++stats_.batches;
  if (peer.last_seq != 0 && batch.seq > peer.last_seq + 1) {
    stats_.gaps += batch.seq - peer.last_seq - 1;
  }
  if (peer.last_seq != 0 && batch.seq <= peer.last_seq) {
    // The peer restarted (its sequence starts over): what it had in flight is gone.
    release_all(peer, now);
  }
  peer.last_seq = batch.seq;
  peer.last_heard = now;
  for (const RoutingEvent& e : batch.events) apply_one(peer, e, batch.age, now);
}

void PeerSync::apply_one(Peer& peer, const RoutingEvent& e, Nanos age, Nanos now) {
  route::EndpointPool& pool = router_.pool();
  if (e.kind == EventKind::kRouted) {
    const std::optional<route::EndpointId> endpoint = pool.find(e.endpoint);
    std::optional<route::EndpointId> prefill;
    if (!e.prefill_endpoint.empty()) prefill = pool.find(e.prefill_endpoint);
    if (!endpoint || (!e.prefill_endpoint.empty() && !prefill)) {
      ++stats_.unknown_endpoint;
      return;
    }
    // One lookup for the check and the insertion; the slot goes if the commit fails.
    const auto [tracked, fresh] = peer.requests.try_emplace(e.request);
    if (!fresh) return;  // delivered twice
    route::RouteRequest r;
    r.id = next_id_++;
    r.keys = e.keys;
    r.prompt_tokens = e.prompt_tokens;
    r.expected_output_tokens = e.expected_output_tokens;
    r.session = e.session;  // commit binds it here too (with session affinity on)
    route::Decision d;
    d.endpoint = *endpoint;
    d.prefill_endpoint = prefill;
    d.prompt_blocks = static_cast<uint32_t>(e.keys.size());
    d.prefill_tokens = e.prefill_tokens;
    // Part of the predicted prefill passed while the event travelled.
    d.predicted_prefill = std::max<Nanos>(0, e.predicted_prefill - age);
    if (!router_.commit(r, d, now)) {
      peer.requests.erase(tracked);
      return;
    }
    tracked->second = {r.id, now};
    ++stats_.routed;
    return;
  }
  auto it = peer.requests.find(e.request);
  if (it == peer.requests.end()) {
    ++stats_.unknown_request;
    return;
  }
  if (e.kind == EventKind::kPrefillDone) {
    pool.on_first_token(it->second.local, now);
    ++stats_.prefill_done;
    return;
  }
  // Finished or failed alike: the peer counts its failures against its own view; here
  // the load goes away.
  pool.on_finished(it->second.local, now);
  peer.requests.erase(it);
  ++stats_.released;
}

void PeerSync::release_all(Peer& peer, Nanos now) {
  for (const auto& [id, t] : peer.requests) {
    router_.pool().on_finished(t.local, now);
    ++stats_.expired_requests;
  }
  peer.requests.clear();
}

void PeerSync::expire(Nanos now) {
  // The ages need a walk over every peer request in flight, thousands in a large fleet;
  // they are checked once per kAgeScan (or max_request_age, when shorter), not at every
  // call.
  const bool scan_ages = now >= next_age_scan_;
  if (scan_ages) next_age_scan_ = now + std::min(kAgeScan, options_.max_request_age);
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& peer = it->second;
    if (now - peer.last_heard >= options_.peer_timeout) {
      ++stats_.dead_replicas;
      release_all(peer, now);
      it = peers_.erase(it);
      continue;
    }
    if (!scan_ages) {
      ++it;
      continue;
    }
    for (auto r = peer.requests.begin(); r != peer.requests.end();) {
      if (now - r->second.routed_at >= options_.max_request_age) {
        router_.pool().on_finished(r->second.local, now);
        ++stats_.expired_requests;
        r = peer.requests.erase(r);
      } else {
        ++r;
      }
    }
    ++it;
  }
}

size_t PeerSync::peer_requests() const {
  size_t n = 0;
  for (const auto& [name, p] : peers_) n += p.requests.size();
  return n;
}

size_t PeerSync::live_peers(Nanos now) const {
  size_t n = 0;
  for (const auto& [name, p] : peers_) n += now - p.last_heard < options_.peer_timeout ? 1 : 0;
  return n;
}

}  // namespace kvgate::cluster
