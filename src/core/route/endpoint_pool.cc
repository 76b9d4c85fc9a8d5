#include "core/route/endpoint_pool.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvgate::route {

EndpointPool::EndpointPool(uint32_t block_size) : block_size_(block_size > 0 ? block_size : 1) {}
EndpointPool::~EndpointPool() = default;

Result<EndpointId> EndpointPool::add(EndpointSpec spec, Nanos now) {
  if (find(spec.url)) return Error(fmt::format("endpoint {} is already in the pool", spec.url));
  EndpointId id = 0;
  while (id < slots_.size() && slots_[id]) ++id;
  if (id >= kv::kMaxEndpoints) return Error("endpoint pool is full");
  if (id == slots_.size()) {
    slots_.emplace_back();
    by_endpoint_.emplace_back();
  }
  Endpoint& e = slots_[id].emplace();
  e.id = id;
  e.spec = std::move(spec);
  e.added_at = now;
  ids_.insert(std::lower_bound(ids_.begin(), ids_.end(), id), id);
  return id;
}

bool EndpointPool::remove(EndpointId id) {
  if (!get(id)) return false;
  // Requests decoding there are forgotten (their later callbacks are ignored); their
  // remote prefill, if still running elsewhere, stops counting there.
  for (RequestId rid : by_endpoint_[id]) {
    auto it = requests_.find(rid);
    if (it == requests_.end()) continue;
    TrackedRequest& r = it->second;
    if (!r.prefill_done && r.prefill_endpoint && *r.prefill_endpoint != id) {
      Endpoint& p = *slots_[*r.prefill_endpoint];
      p.load.active_prefill_tokens -=
          std::min<uint64_t>(p.load.active_prefill_tokens, r.prefill_tokens);
      if (p.load.in_flight > 0) --p.load.in_flight;
    }
    requests_.erase(it);
  }
  by_endpoint_[id].clear();
  // Requests elsewhere whose remote prefill ran here: their prefill is over.
  for (auto& [rid, r] : requests_) {
    if (r.prefill_endpoint == id) {
      r.prefill_endpoint.reset();
      r.prefill_done = true;
    }
  }
  active_.remove_endpoint(id);
  slots_[id].reset();
  ids_.erase(std::lower_bound(ids_.begin(), ids_.end(), id));
  return true;
}

bool EndpointPool::set_health(EndpointId id, Health health) {
  if (!get(id)) return false;
  slots_[id]->health = health;
  return true;
}

bool EndpointPool::on_metrics(EndpointId id, ScrapedMetrics metrics, Nanos now) {
  if (!get(id)) return false;
  Endpoint& e = *slots_[id];
  metrics.scraped_at = now;
  e.metrics = metrics;
  e.in_flight_at_scrape = e.load.in_flight;
  e.unstarted_since_scrape = 0;
  ++e.scrapes;
  e.decode_blocks_at_scrape = e.load.active_decode_blocks;
  return true;
}

bool EndpointPool::set_kv_capacity(EndpointId id, uint32_t blocks) {
  if (!get(id)) return false;
  slots_[id]->spec.kv_capacity_blocks = blocks;
  return true;
}

bool EndpointPool::set_lora_placed(EndpointId id, std::optional<LoraPlaced> placed) {
  if (!get(id)) return false;
  slots_[id]->lora_placed = std::move(placed);
  return true;
}

const Endpoint* EndpointPool::get(EndpointId id) const {
  return id < slots_.size() && slots_[id] ? &*slots_[id] : nullptr;
}

std::optional<EndpointId> EndpointPool::find(std::string_view url) const {
  for (EndpointId id : ids_) {
    if (slots_[id]->spec.url == url) return id;
  }
  return std::nullopt;
}

uint32_t EndpointPool::request_blocks(uint32_t prompt_tokens, uint32_t expected_output_tokens,
                                      size_t full_blocks) const {
  const uint64_t tokens = uint64_t{prompt_tokens} + expected_output_tokens;
  const uint64_t blocks = (tokens + block_size_ - 1) / block_size_;
  return static_cast<uint32_t>(std::max<uint64_t>(blocks, full_blocks));
}

Status EndpointPool::on_routed(RequestId id, const Placement& p, Nanos now) {
  if (requests_.contains(id)) return Error(fmt::format("request {} is already in flight", id));
  if (!get(p.endpoint)) return Error(fmt::format("unknown endpoint {}", p.endpoint));
  if (p.prefill_endpoint && !get(*p.prefill_endpoint)) {
    return Error(fmt::format("unknown prefill endpoint {}", *p.prefill_endpoint));
  }
  TrackedRequest& r = track(id);
  r.id = id;
  r.endpoint = p.endpoint;
  if (p.prefill_endpoint && *p.prefill_endpoint != p.endpoint)
    r.prefill_endpoint = p.prefill_endpoint;
  r.keys.assign(p.keys.begin(), p.keys.end());
  r.private_blocks = request_blocks(p.prompt_tokens, p.expected_output_tokens, p.keys.size()) -
                     static_cast<uint32_t>(p.keys.size());
  r.prefill_tokens = p.prefill_tokens;
  r.expected_output_tokens = p.expected_output_tokens;
  r.routed_at = now;
  r.predicted_prefill_end = p.predicted_prefill_end;
  r.latency_features = p.latency_features;

  Endpoint& e = *slots_[p.endpoint];
  r.added_blocks = active_.add(p.endpoint, r.keys) + r.private_blocks;
  e.load.active_decode_blocks += r.added_blocks;
  ++e.load.in_flight;
  ++e.load.routed_total;
  r.scrape = e.scrapes;
  ++e.unstarted_since_scrape;
  Endpoint& prefiller = r.prefill_endpoint ? *slots_[*r.prefill_endpoint] : e;
  queue_prefill(prefiller, r.prefill_tokens, now);
  if (r.prefill_endpoint) {
    ++prefiller.load.in_flight;
    ++prefiller.load.routed_total;
  }
  by_endpoint_[p.endpoint].push_back(id);
  return {};
}

void EndpointPool::note_started(const TrackedRequest& r) {
  Endpoint& e = *slots_[r.endpoint];
  if (r.scrape == e.scrapes && e.unstarted_since_scrape > 0) --e.unstarted_since_scrape;
}

bool EndpointPool::on_first_token(RequestId id, Nanos now) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  TrackedRequest& r = it->second;
  if (r.first_token_at) return true;
  r.first_token_at = now;
  note_started(r);
  if (!r.prefill_done) {
    r.prefill_done = true;
    Endpoint& prefiller = *slots_[r.prefill_endpoint ? *r.prefill_endpoint : r.endpoint];
    prefiller.load.active_prefill_tokens -=
        std::min<uint64_t>(prefiller.load.active_prefill_tokens, r.prefill_tokens);
    prefiller.load.prefill_moved_at = now;
    if (r.prefill_endpoint && prefiller.load.in_flight > 0) --prefiller.load.in_flight;
  }
  return true;
}

bool EndpointPool::on_moved(RequestId id, EndpointId to, Nanos now) {
  auto it = requests_.find(id);
  if (it == requests_.end() || !get(to)) return false;
  TrackedRequest& r = it->second;
  if (r.endpoint == to) return true;
  if (r.prefill_endpoint == to) return false;
  Endpoint& from = *slots_[r.endpoint];
  Endpoint& dest = *slots_[to];
  if (!r.first_token_at) note_started(r);        // no longer in the old endpoint's queue
  if (!r.prefill_done && !r.prefill_endpoint) {  // prefilled where it decodes
    from.load.active_prefill_tokens -=
        std::min<uint64_t>(from.load.active_prefill_tokens, r.prefill_tokens);
    from.load.prefill_moved_at = now;
    queue_prefill(dest, r.prefill_tokens, now);
  }
  const uint64_t freed = uint64_t{active_.release(r.endpoint, r.keys)} + r.private_blocks;
  from.load.active_decode_blocks -= std::min(from.load.active_decode_blocks, freed);
  if (from.load.in_flight > 0) --from.load.in_flight;
  ++from.load.failed_total;
  auto& list = by_endpoint_[r.endpoint];
  auto pos = std::find(list.begin(), list.end(), r.id);
  if (pos != list.end()) {
    *pos = list.back();
    list.pop_back();
  }
  r.endpoint = to;
  r.added_blocks = active_.add(to, r.keys) + r.private_blocks;
  dest.load.active_decode_blocks += r.added_blocks;
  ++dest.load.in_flight;
  ++dest.load.routed_total;
  r.scrape = dest.scrapes;
  if (!r.first_token_at) ++dest.unstarted_since_scrape;
  r.latency_features.reset();
  by_endpoint_[to].push_back(id);
  return true;
}

void EndpointPool::queue_prefill(Endpoint& e, uint32_t tokens, Nanos now) {
  if (e.load.active_prefill_tokens == 0 && tokens > 0) e.load.prefill_moved_at = now;
  e.load.active_prefill_tokens += tokens;
}

void EndpointPool::release(TrackedRequest& r, bool failed, Nanos now) {
  Endpoint& e = *slots_[r.endpoint];
  if (!r.first_token_at) note_started(r);
  if (!r.prefill_done) {
    r.prefill_done = true;
    Endpoint& prefiller = *slots_[r.prefill_endpoint ? *r.prefill_endpoint : r.endpoint];
    prefiller.load.active_prefill_tokens -=
        std::min<uint64_t>(prefiller.load.active_prefill_tokens, r.prefill_tokens);
    prefiller.load.prefill_moved_at = now;
    if (r.prefill_endpoint) {
      if (prefiller.load.in_flight > 0) --prefiller.load.in_flight;
      if (failed) ++prefiller.load.failed_total;
    }
  }
  const uint64_t freed = uint64_t{active_.release(r.endpoint, r.keys)} + r.private_blocks;
  e.load.active_decode_blocks -= std::min(e.load.active_decode_blocks, freed);
  if (e.load.in_flight > 0) --e.load.in_flight;
  if (failed) ++e.load.failed_total;
  auto& list = by_endpoint_[r.endpoint];
  auto pos = std::find(list.begin(), list.end(), r.id);
  if (pos != list.end()) {
    *pos = list.back();
    list.pop_back();
  }
}

TrackedRequest& EndpointPool::track(RequestId id) {
  if (spare_.empty()) return requests_[id];
  auto node = std::move(spare_.back());
  spare_.pop_back();
  std::vector<kv::BlockKey> keys = std::move(node.mapped().keys);
  keys.clear();
  node.key() = id;
  node.mapped() = TrackedRequest{};
  node.mapped().keys = std::move(keys);
  return requests_.insert(std::move(node)).position->second;
}

void EndpointPool::untrack(std::unordered_map<RequestId, TrackedRequest>::iterator it) {
  if (spare_.size() < kMaxSpareNodes) {
    spare_.push_back(requests_.extract(it));
  } else {
    requests_.erase(it);
  }
}

bool EndpointPool::on_finished(RequestId id, Nanos now) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  release(it->second, /*failed=*/false, now);
  untrack(it);
  return true;
}

bool EndpointPool::on_failed(RequestId id, Nanos now) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  release(it->second, /*failed=*/true, now);
  untrack(it);
  return true;
}

const TrackedRequest* EndpointPool::request(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

void EndpointPool::active_prefix(std::span<const kv::BlockKey> keys,
                                 std::vector<ActiveBlocks::Prefix>& out) const {
  active_.prefix(keys, out);
}

double EndpointPool::held_decode_blocks(const Endpoint& e) const {
  // What is held now: the router's own count, or the scrape when it shows more (load
  // from other routers, or blocks the engine holds that we do not track); that extra
  // is assumed to stay. The scrape is brought up to date with what the router saw
  // since: blocks of requests routed since then are added, those of requests finished
  // since then taken off (else a stale scrape would hide the room they freed until the
  // next one).
  const double routed = static_cast<double>(e.load.active_decode_blocks);
  double held = routed;
  if (e.metrics && e.spec.kv_capacity_blocks > 0) {
    const double since = routed - static_cast<double>(e.decode_blocks_at_scrape);
    held = std::max(held, e.metrics->kv_usage * e.spec.kv_capacity_blocks + since);
  }
  return held;
}

double EndpointPool::decode_blocks_now(EndpointId id) const {
  const Endpoint* e = get(id);
  if (!e) return 0;
  // The router reserves a request's blocks at routing; those whose prefill has not come
  // back are not on the decode endpoint yet.
  double not_there = 0;
  for (RequestId rid : by_endpoint_[id]) {
    const TrackedRequest& r = requests_.at(rid);
    if (!r.prefill_done) not_there += r.added_blocks;
  }
  return std::max(0.0, held_decode_blocks(*e) - not_there);
}

double EndpointPool::predicted_decode_blocks(EndpointId id, Nanos at,
                                             double decode_seconds_per_token) const {
  const Endpoint* e = get(id);
  if (!e) return 0;
  const double held = held_decode_blocks(*e);
  // The router reserves a request's blocks at routing; take out those not yet there at
  // `at` (prefill still running then) and those already gone (decode finished by then).
  double not_there = 0;
  for (RequestId rid : by_endpoint_[id]) {
    const TrackedRequest& r = requests_.at(rid);
    const Nanos decode_start = r.first_token_at ? *r.first_token_at : r.predicted_prefill_end;
    if (!r.first_token_at && r.predicted_prefill_end > at) {
      not_there += r.added_blocks;
      continue;
    }
    if (r.expected_output_tokens == 0) continue;  // unknown length: assume it stays
    const Nanos finish =
        decode_start + seconds(r.expected_output_tokens * decode_seconds_per_token);
    if (finish <= at) not_there += r.added_blocks;
  }
  return std::max(0.0, held - not_there);
}

}  // namespace kvgate::route
