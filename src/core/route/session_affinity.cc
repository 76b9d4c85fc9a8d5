#include "core/route/session_affinity.h"

namespace kvgate::route {
namespace {

// splitmix64's finalizer: spreads the bits of a fold of the input.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// FNV-1a over the bytes, from `h`.
uint64_t fnv(std::string_view text, uint64_t h) {
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t nonzero(uint64_t x) { return x == 0 ? 1 : x; }

}  // namespace

uint64_t session_key(std::string_view value, std::string_view model) {
  uint64_t h = fnv(model, 0xcbf29ce484222325ULL);
  h = fnv(std::string_view("\0", 1), h);  // "ab"+"c" and "a"+"bc" differ
  h = fnv(value, h);
  return nonzero(mix(h));
}

uint64_t session_key(uint64_t id) { return nonzero(mix(id + 0x9e3779b97f4a7c15ULL)); }

bool keeps_session(double bound_load, double least_load, const SessionAffinityConfig& config) {
  const bool over_abs = bound_load > least_load + config.max_extra_requests;
  const bool over_rel = bound_load > least_load * config.max_load_ratio;
  return !(over_abs && over_rel);
}

SessionAffinity::SessionAffinity(size_t capacity, Nanos idle_ttl)
    : capacity_(capacity == 0 ? 1 : capacity), idle_ttl_(idle_ttl) {}

void SessionAffinity::unlink(uint32_t i) { lru_.unlink(slots_, i); }

void SessionAffinity::push_front(uint32_t i) { lru_.push_front(slots_, i); }

void SessionAffinity::drop(uint32_t i) {
  unlink(i);
  index_.erase(slots_[i].session);
  free_.push_back(i);
}

std::optional<EndpointId> SessionAffinity::find(uint64_t session, Nanos now) const {
  auto it = index_.find(session);
  if (it == index_.end()) return std::nullopt;
  const Slot& s = slots_[it->second];
  if (expired(s, now)) return std::nullopt;
  return s.endpoint;
}

void SessionAffinity::bind(uint64_t session, EndpointId endpoint, Nanos now) {
  if (auto it = index_.find(session); it != index_.end()) {
    const uint32_t i = it->second;
    Slot& s = slots_[i];
    if (s.endpoint != endpoint) ++stats_.rebound;
    s.endpoint = endpoint;
    if (now > s.last_used) s.last_used = now;  // a peer's late event never ages it
    unlink(i);
    push_front(i);
    return;
  }
  // Idle bindings at the cold end go first (cheap: at most a few per call in steady
  // state), then the least recently used one if the table is still full.
  for (int n = 0; n < 4 && lru_.tail != kNil && expired(slots_[lru_.tail], now); ++n) {
    drop(lru_.tail);
    ++stats_.expired;
  }
  if (index_.size() >= capacity_ && lru_.tail != kNil) {
    drop(lru_.tail);
    ++stats_.evicted;
  }
  uint32_t i = 0;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
  } else {
    i = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[i];
  s.session = session;
  s.endpoint = endpoint;
  s.last_used = now;
  push_front(i);
  index_.emplace(session, i);
  ++stats_.bound;
}

void SessionAffinity::forget_endpoint(EndpointId endpoint) {
  for (uint32_t i = lru_.head; i != kNil;) {
    const uint32_t next = slots_[i].next;
    if (slots_[i].endpoint == endpoint) drop(i);
    i = next;
  }
}

}  // namespace kvgate::route
