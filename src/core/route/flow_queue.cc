#include "core/route/flow_queue.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

namespace kvgate::route {

std::string_view to_string(BandOrder order) {
  return order == BandOrder::kStrict ? "strict" : "weighted";
}

std::optional<BandOrder> parse_band_order(std::string_view text) {
  if (text == "strict") return BandOrder::kStrict;
  if (text == "weighted") return BandOrder::kWeighted;
  return std::nullopt;
}

std::string_view to_string(FlowRefusal refusal) {
  switch (refusal) {
    case FlowRefusal::kNone:
      return "ok";
    case FlowRefusal::kQueueFull:
      return "queue_full";
    case FlowRefusal::kQueueTimeout:
      return "queue_timeout";
    case FlowRefusal::kDeadlineUnmeetable:
      return "deadline_unmeetable";
  }
  return "ok";
}

int http_status(FlowRefusal refusal) {
  switch (refusal) {
    case FlowRefusal::kNone:
      return 200;
    case FlowRefusal::kQueueFull:
    case FlowRefusal::kDeadlineUnmeetable:
      return 429;
    case FlowRefusal::kQueueTimeout:
      return 503;
  }
  return 503;
}

std::string_view to_string(LateBinding binding) {
  switch (binding) {
    case LateBinding::kRoom:
      return "room";
    case LateBinding::kAny:
      return "any";
    case LateBinding::kCache:
      return "cache";
  }
  return "room";
}

std::optional<LateBinding> parse_late_binding(std::string_view text) {
  if (text == "room") return LateBinding::kRoom;
  if (text == "any") return LateBinding::kAny;
  if (text == "cache") return LateBinding::kCache;
  return std::nullopt;
}

Status FlowQueueConfig::validate() const {
  for (size_t b = 0; b < kBands; ++b) {
    if (!(band_weights[b] > 0) || !std::isfinite(band_weights[b])) {
      return Error(fmt::format("flow_control.band_weights.{} must be > 0",
                               to_string(static_cast<Criticality>(b))));
    }
    if (max_wait[b] < 0) {
      return Error(fmt::format("flow_control.max_wait.{} must be >= 0",
                               to_string(static_cast<Criticality>(b))));
    }
  }
  if (starvation_bound < 0) return Error("flow_control.starvation_bound must be >= 0");
  if (max_requests == 0) return Error("flow_control.max_requests must be > 0");
  if (!(input_weight >= 0) || !std::isfinite(input_weight)) {
    return Error("flow_control.input_weight must be >= 0");
  }
  if (!(output_weight >= 0) || !std::isfinite(output_weight)) {
    return Error("flow_control.output_weight must be >= 0");
  }
  if (input_weight + output_weight <= 0) {
    return Error("flow_control: input_weight and output_weight cannot both be 0");
  }
  return {};
}

namespace {

bool parse_bool(std::string_view v, bool& out) {
  if (v == "true") return out = true, true;
  if (v == "false") return out = false, true;
  return false;
}

template <typename T>
bool parse_uint(std::string_view v, T& out) {
  T x{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size()) return false;
  out = x;
  return true;
}

bool parse_double(std::string_view v, double& out) {
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || !std::isfinite(x)) return false;
  out = x;
  return true;
}

bool parse_seconds(std::string_view v, Nanos& out) {
  double s = 0;
  if (!parse_double(v, s) || s < 0 || s > 1e9) return false;
  out = seconds(s);
  return true;
}

std::optional<size_t> band_suffix(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix)) return std::nullopt;
  auto c = parse_criticality(key.substr(prefix.size()));
  if (!c) return std::nullopt;
  return static_cast<size_t>(*c);
}

}  // namespace

Status apply_flow_entries(std::span<const std::pair<std::string, std::string>> entries,
                          FlowQueueConfig& c) {
  for (const auto& [key, value] : entries) {
    bool ok = false;
    if (key == "enabled") {
      ok = parse_bool(value, c.enabled);
    } else if (key == "shed_sheddable") {
      ok = parse_bool(value, c.shed_sheddable);
    } else if (key == "band_order") {
      auto o = parse_band_order(value);
      if (o) c.band_order = *o;
      ok = o.has_value();
    } else if (auto b = band_suffix(key, "band_weights.")) {
      ok = parse_double(value, c.band_weights[*b]);
    } else if (auto w = band_suffix(key, "max_wait.")) {
      ok = parse_seconds(value, c.max_wait[*w]);
    } else if (key == "max_wait") {
      Nanos all = 0;
      ok = parse_seconds(value, all);
      if (ok) c.max_wait.fill(all);
    } else if (key == "starvation_bound") {
      ok = parse_seconds(value, c.starvation_bound);
    } else if (key == "max_requests") {
      ok = parse_uint(value, c.max_requests);
    } else if (key == "max_tokens") {
      ok = parse_uint(value, c.max_tokens);
    } else if (key == "tenant_max_requests") {
      ok = parse_uint(value, c.tenant_max_requests);
    } else if (key == "tenant_max_tokens") {
      ok = parse_uint(value, c.tenant_max_tokens);
    } else if (key == "input_weight") {
      ok = parse_double(value, c.input_weight);
    } else if (key == "output_weight") {
      ok = parse_double(value, c.output_weight);
    } else if (key == "default_output_tokens") {
      ok = parse_uint(value, c.default_output_tokens);
    } else if (key == "sparse_reserve") {
      ok = parse_uint(value, c.sparse_reserve);
    } else if (key == "late_binding") {
      auto b = parse_late_binding(value);
      if (!b) {
        return Error(fmt::format(
            "flow_control.late_binding: bad value '{}' (expected room, any or cache)", value));
      }
      c.late_binding = *b;
      ok = true;
    } else if (key == "cache_reserve") {
      ok = parse_uint(value, c.cache_reserve);
    } else if (key == "room_share") {
      auto r = parse_room_share(value);
      if (r) c.room_share = *r;
      ok = r.has_value();
    } else if (key == "targets_first") {
      ok = parse_bool(value, c.targets_first);
    } else if (key == "prefill_threshold") {
      ok = parse_uint(value, c.prefill_threshold);
    } else {
      return Error(fmt::format("flow_control: unknown key '{}'", key));
    }
    if (!ok) return Error(fmt::format("flow_control.{}: bad value '{}'", key, value));
  }
  return {};
}

// --- FlowQueue ---

struct FlowQueue::Tenant {
  std::string name;
  double weight = 1;
  double counter = 0;
  std::array<OrderSet, kBands> items;
  uint64_t served_at = 0;                         // TenantKey::served_at
  std::array<TenantSet::iterator, kBands> key{};  // valid while items[b] is not empty
  uint32_t queued = 0;
  uint64_t queued_tokens = 0;
  uint64_t dispatched = 0, evicted = 0, timed_out = 0, deadline_missed = 0;
  uint64_t served_tokens = 0;
  double unreported = 0;       // service given here not yet taken (take_service)
  bool service_noted = false;  // in service_changed_
  double peer_service = 0;     // the peers' service added to `counter`
};

bool FlowQueue::ItemOrder::operator()(const Item* a, const Item* b) const {
  if (a->deadline != b->deadline) return a->deadline < b->deadline;
  return a->seq < b->seq;
}
bool FlowQueue::ItemSeq::operator()(const Item* a, const Item* b) const { return a->seq < b->seq; }
bool FlowQueue::ItemDeadline::operator()(const Item* a, const Item* b) const {
  if (a->deadline != b->deadline) return a->deadline < b->deadline;
  return a->seq < b->seq;
}
bool FlowQueue::ItemDue::operator()(const Item* a, const Item* b) const {
  if (a->due != b->due) return a->due < b->due;
  return a->seq < b->seq;
}
bool FlowQueue::TenantKey::operator<(const TenantKey& o) const {
  if (counter != o.counter) return counter < o.counter;
  if (served_at != o.served_at) return served_at < o.served_at;
  return since < o.since;  // unique: one tenant per `since` and band
}

FlowQueue::FlowQueue(FlowQueueConfig config) : config_(config) {}
FlowQueue::~FlowQueue() = default;

void FlowQueue::set_config(FlowQueueConfig config) { config_ = config; }

double FlowQueue::cost(uint32_t prompt, uint32_t output) const {
  return config_.input_weight * prompt + config_.output_weight * output;
}

FlowQueue::Tenant& FlowQueue::tenant(std::string_view name) {
  auto it = tenants_.find(std::string(name));
  if (it != tenants_.end()) return *it->second;
  auto t = std::make_unique<Tenant>();
  t->name = std::string(name);
  t->counter = last_counter_;  // a new tenant starts where the service is now
  Tenant& ref = *t;
  tenants_.emplace(t->name, std::move(t));
  return ref;
}

void FlowQueue::set_counter(Tenant& t, double counter) {
  for (size_t b = 0; b < kBands; ++b) {
    if (t.items[b].empty()) continue;
    // Re-keyed in its own node: no allocation.
    auto node = bands_[b].tenants.extract(t.key[b]);
    node.value().counter = counter;
    node.value().served_at = t.served_at;
    t.key[b] = bands_[b].tenants.insert(std::move(node)).position;
  }
  t.counter = counter;
}

void FlowQueue::serve(Tenant& t, double cost) {
  t.served_at = ++services_;
  set_counter(t, t.counter + cost);
  last_counter_ = t.counter;
  note_service(t, cost);
}

void FlowQueue::note_service(Tenant& t, double service) {
  if (!track_service_) return;
  t.unreported += service;
  if (!t.service_noted) {
    t.service_noted = true;
    service_changed_.push_back(&t);
  }
}

void FlowQueue::take_service(std::vector<std::pair<std::string_view, double>>& out) {
  for (Tenant* t : service_changed_) {
    if (t->unreported != 0) out.emplace_back(t->name, t->unreported);
    t->unreported = 0;
    t->service_noted = false;
  }
  service_changed_.clear();
}

void FlowQueue::add_peer_service(std::string_view name, double service) {
  if (service == 0 || !std::isfinite(service)) return;
  Tenant& t = tenant(name);
  t.peer_service += service;
  set_counter(t, t.counter + service);
}

namespace {

// Inserts `value` into `set` in a spare node when there is one.
template <typename Set>
typename Set::iterator insert_reusing(Set& set, std::vector<typename Set::node_type>& spare,
                                      typename Set::value_type value) {
  if (spare.empty()) return set.insert(value).first;
  auto node = std::move(spare.back());
  spare.pop_back();
  node.value() = value;
  return set.insert(std::move(node)).position;
}

template <typename Set>
void erase_keeping(Set& set, std::vector<typename Set::node_type>& spare, typename Set::iterator it,
                   size_t max_spare) {
  if (spare.size() < max_spare) {
    spare.push_back(set.extract(it));
  } else {
    set.erase(it);
  }
}

}  // namespace

Nanos FlowQueue::expiry_of(const Item& item) const {
  Nanos at = item.deadline;
  const Nanos wait = config_.max_wait[item.band];
  if (wait > 0) at = std::min(at, item.enqueued_at + wait);
  return at;
}

double FlowQueue::dispatch_rate(Nanos now) const {
  constexpr double kTau = 10;
  const double dt = std::max(0.0, to_seconds(now - rate_at_));
  return rate_ * std::exp(-dt / kTau);
}

void FlowQueue::note_dispatch(Nanos now) {
  constexpr double kTau = 10;
  rate_ = dispatch_rate(now) + 1.0 / kTau;
  rate_at_ = std::max(rate_at_, now);
}

FlowRefusal FlowQueue::enqueue(const Entry& e, Nanos now, std::vector<Removed>& evicted) {
  if (entries_.count(e.id)) return FlowRefusal::kQueueFull;
  const size_t b = index(e.band);
  const uint32_t output = output_tokens_charged(e.expected_output_tokens);
  const uint64_t tokens = uint64_t{e.prompt_tokens} + output;
  Tenant& t = tenant(e.tenant);
  if (e.weight > 0 && std::isfinite(e.weight)) t.weight = e.weight;

  if (e.deadline) {
    // The queue ahead: every request of this band and the bands above it.
    size_t ahead = 0;
    for (size_t x = 0; x <= b; ++x) ahead += bands_[x].by_seq.size();
    const double rate = dispatch_rate(now);
    const Nanos predicted = rate > 0 ? seconds(static_cast<double>(ahead) / rate) : 0;
    if (*e.deadline <= now + predicted) {
      ++t.deadline_missed;
      return FlowRefusal::kDeadlineUnmeetable;
    }
  }
  if ((config_.tenant_max_requests > 0 && t.queued + 1 > config_.tenant_max_requests) ||
      (config_.tenant_max_tokens > 0 && t.queued_tokens + tokens > config_.tenant_max_tokens) ||
      (config_.max_tokens > 0 && tokens > config_.max_tokens)) {
    ++t.evicted;
    return FlowRefusal::kQueueFull;
  }
  auto over = [&] {
    return entries_.size() + 1 > config_.max_requests ||
           (config_.max_tokens > 0 && tokens_ + tokens > config_.max_tokens);
  };
  // Check first that evicting lower bands can make room, so that nothing is evicted for
  // a newcomer that is refused anyway.
  if (over()) {
    size_t n = entries_.size();
    uint64_t tok = tokens_;
    for (size_t x = kBands; x-- > b + 1;) {
      n -= bands_[x].by_seq.size();
      tok -= bands_[x].tokens;
    }
    if (n + 1 > config_.max_requests ||
        (config_.max_tokens > 0 && tok + tokens > config_.max_tokens)) {
      ++t.evicted;
      return FlowRefusal::kQueueFull;
    }
    while (over()) {
      size_t victim_band = kBands - 1;
      while (bands_[victim_band].by_seq.empty()) --victim_band;
      Item* victim = *bands_[victim_band].by_seq.rbegin();
      ++victim->tenant->evicted;
      evicted.push_back(unlink(victim, FlowRefusal::kQueueFull));
    }
  }

  Item* p;
  if (!spare_items_.empty()) {
    auto node = std::move(spare_items_.back());
    spare_items_.pop_back();
    node.key() = e.id;
    node.mapped() = Item{};
    p = &entries_.insert(std::move(node)).position->second;
  } else {
    p = &entries_.try_emplace(e.id).first->second;
  }
  p->id = e.id;
  p->tenant = &t;
  p->band = b;
  p->prompt_tokens = e.prompt_tokens;
  p->output_tokens = output;
  p->tokens = tokens;
  p->enqueued_at = now;
  p->deadline = e.deadline.value_or(kNoDeadline);
  p->targeted = e.ttft_target > 0;
  if (p->targeted) {
    // Saturating: a target too far out to add is due last.
    p->due = now > 0 && e.ttft_target > kNoDeadline - now ? kNoDeadline : now + e.ttft_target;
  }
  p->seq = ++seq_;
  p->request = e.request;

  if (t.queued == 0) {
    // Back from idle: lift to the backlogged tenants' lowest counter (no banked credit).
    double floor = std::numeric_limits<double>::infinity();
    for (const Band& band : bands_) {
      if (!band.tenants.empty()) floor = std::min(floor, band.tenants.begin()->counter);
    }
    if (!std::isfinite(floor)) floor = last_counter_;
    if (t.counter < floor) t.counter = floor;
  }
  Band& band = bands_[b];
  if (band.by_seq.empty() && config_.band_order == BandOrder::kWeighted) {
    // A band coming back starts at the lowest pass among the busy ones.
    double floor = std::numeric_limits<double>::infinity();
    for (const Band& other : bands_) {
      if (!other.by_seq.empty()) floor = std::min(floor, other.pass);
    }
    if (std::isfinite(floor)) band.pass = std::max(band.pass, floor);
  }
  if (t.items[b].empty()) {
    t.key[b] = band.tenants.insert({t.counter, t.served_at, p->seq, &t}).first;
  }
  p->in_tenant = insert_reusing(t.items[b], spare_order_, p);
  p->in_band = insert_reusing(band.by_seq, spare_seq_, p);
  band.tokens += tokens;
  if (p->deadline != kNoDeadline) {
    p->in_deadline = insert_reusing(by_deadline_, spare_deadline_, p);
  }
  if (p->targeted) p->in_due = insert_reusing(band.targeted, spare_due_, p);
  ++t.queued;
  t.queued_tokens += tokens;
  tokens_ += tokens;
  return FlowRefusal::kNone;
}

FlowQueue::Removed FlowQueue::unlink(Item* item, FlowRefusal refusal) {
  Tenant& t = *item->tenant;
  const size_t b = item->band;
  Band& band = bands_[b];
  erase_keeping(t.items[b], spare_order_, item->in_tenant, kMaxSpare);
  if (t.items[b].empty()) band.tenants.erase(t.key[b]);
  erase_keeping(band.by_seq, spare_seq_, item->in_band, kMaxSpare);
  band.tokens -= item->tokens;
  if (item->deadline != kNoDeadline) {
    erase_keeping(by_deadline_, spare_deadline_, item->in_deadline, kMaxSpare);
  }
  if (item->targeted) erase_keeping(band.targeted, spare_due_, item->in_due, kMaxSpare);
  --t.queued;
  t.queued_tokens -= item->tokens;
  tokens_ -= item->tokens;
  Removed out;
  out.id = item->id;
  out.request = item->request;
  out.tenant = t.name;
  out.band = static_cast<Criticality>(b);
  out.enqueued_at = item->enqueued_at;
  out.charged_output_tokens = item->output_tokens;
  out.refusal = refusal;
  auto it = entries_.find(item->id);  // `item` dies here
  if (spare_items_.size() < kMaxSpare) {
    spare_items_.push_back(entries_.extract(it));
  } else {
    entries_.erase(it);
  }
  return out;
}

size_t FlowQueue::pick_band(Nanos now) const {
  if (config_.starvation_bound > 0) {
    size_t starving = kBands;
    Nanos oldest = kNoDeadline;
    for (size_t b = 1; b < kBands; ++b) {
      if (bands_[b].by_seq.empty()) continue;
      const Nanos at = (*bands_[b].by_seq.begin())->enqueued_at;
      if (now - at >= config_.starvation_bound && at < oldest) {
        oldest = at;
        starving = b;
      }
    }
    if (starving < kBands) return starving;
  }
  size_t pick = kBands;
  for (size_t b = 0; b < kBands; ++b) {
    if (bands_[b].by_seq.empty()) continue;
    if (config_.band_order == BandOrder::kStrict) return b;
    if (pick == kBands || bands_[b].pass < bands_[pick].pass) pick = b;
  }
  return pick;
}

FlowQueue::Item* FlowQueue::next_in(size_t b) const {
  const Band& band = bands_[b];
  if (config_.targets_first && !band.targeted.empty()) return *band.targeted.begin();
  return *band.tenants.begin()->tenant->items[b].begin();
}

std::optional<FlowQueue::Next> FlowQueue::peek(Nanos now) const {
  const size_t b = pick_band(now);
  if (b == kBands) return std::nullopt;
  const Item& item = *next_in(b);
  const Tenant& t = *item.tenant;
  return Next{.id = item.id,
              .request = item.request,
              .sparse = t.queued == 1 && entries_.size() > 1,
              .backlogged = t.queued > 1};
}

std::optional<FlowQueue::Removed> FlowQueue::pop(Nanos now) {
  const size_t b = pick_band(now);
  if (b == kBands) return std::nullopt;
  Band& band = bands_[b];
  Item* item = next_in(b);
  Tenant& t = *item->tenant;
  const double charge = cost(item->prompt_tokens, item->output_tokens) / t.weight;
  const uint64_t served = uint64_t{item->prompt_tokens} + item->output_tokens;
  Removed out = unlink(item, FlowRefusal::kNone);
  band.pass += 1.0 / config_.band_weights[b];
  serve(t, charge);
  ++t.dispatched;
  t.served_tokens += served;
  note_dispatch(now);
  return out;
}

bool FlowQueue::remove(RequestId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  unlink(&it->second, FlowRefusal::kNone);
  return true;
}

void FlowQueue::expire(Nanos now, std::vector<Removed>& out) {
  for (size_t b = 0; b < kBands; ++b) {
    const Nanos wait = config_.max_wait[b];
    if (wait <= 0) continue;
    while (!bands_[b].by_seq.empty()) {
      Item* oldest = *bands_[b].by_seq.begin();
      if (oldest->enqueued_at + wait > now) break;
      ++oldest->tenant->timed_out;
      out.push_back(unlink(oldest, FlowRefusal::kQueueTimeout));
    }
  }
  while (!by_deadline_.empty()) {
    Item* first = *by_deadline_.begin();
    if (first->deadline > now) break;
    ++first->tenant->deadline_missed;
    out.push_back(unlink(first, FlowRefusal::kDeadlineUnmeetable));
  }
}

std::optional<Nanos> FlowQueue::next_expiry() const {
  Nanos at = kNoDeadline;
  for (size_t b = 0; b < kBands; ++b) {
    if (bands_[b].by_seq.empty() || config_.max_wait[b] <= 0) continue;
    at = std::min(at, (*bands_[b].by_seq.begin())->enqueued_at + config_.max_wait[b]);
  }
  if (!by_deadline_.empty()) at = std::min(at, (*by_deadline_.begin())->deadline);
  if (at == kNoDeadline) return std::nullopt;
  return at;
}

void FlowQueue::charge(std::string_view name, double weight, uint32_t prompt_tokens,
                       uint32_t output_tokens, Nanos now) {
  Tenant& t = tenant(name);
  if (weight > 0 && std::isfinite(weight)) t.weight = weight;
  if (t.queued == 0 && t.counter < last_counter_) {
    // Served while nobody waits: the same lift as a return from idle, against the
    // service given last (otherwise an idle tenant's old counter would be its credit).
    t.counter = last_counter_;
  }
  serve(t, cost(prompt_tokens, output_tokens) / t.weight);
  ++t.dispatched;
  t.served_tokens += uint64_t{prompt_tokens} + output_tokens;
  note_dispatch(now);
}

void FlowQueue::correct_output(std::string_view name, uint32_t charged, uint32_t actual) {
  auto it = tenants_.find(std::string(name));
  if (it == tenants_.end()) return;
  Tenant& t = *it->second;
  const double delta =
      config_.output_weight * (static_cast<double>(actual) - static_cast<double>(charged));
  set_counter(t, t.counter + delta / t.weight);
  note_service(t, delta / t.weight);
  t.served_tokens = t.served_tokens + actual >= charged ? t.served_tokens + actual - charged : 0;
}

std::vector<FlowTenantStats> FlowQueue::tenants() const {
  std::map<std::string_view, const Tenant*> sorted;
  for (const auto& [name, t] : tenants_) sorted.emplace(t->name, t.get());
  std::vector<FlowTenantStats> out;
  out.reserve(sorted.size());
  for (const auto& [name, t] : sorted) {
    FlowTenantStats s;
    s.name = t->name;
    s.weight = t->weight;
    s.counter = t->counter;
    for (size_t b = 0; b < kBands; ++b) s.queued[b] = static_cast<uint32_t>(t->items[b].size());
    s.queued_tokens = t->queued_tokens;
    s.dispatched = t->dispatched;
    s.evicted = t->evicted;
    s.timed_out = t->timed_out;
    s.deadline_missed = t->deadline_missed;
    s.served_tokens = t->served_tokens;
    s.peer_service = t->peer_service;
    out.push_back(s);
  }
  return out;
}

std::vector<FlowQueue::HeadView> FlowQueue::head(size_t limit) const {
  std::vector<HeadView> out;
  for (size_t b = 0; b < kBands && out.size() < limit; ++b) {
    for (const TenantKey& k : bands_[b].tenants) {
      if (out.size() >= limit) break;
      const Item* item = *k.tenant->items[b].begin();
      out.push_back({.band = static_cast<Criticality>(b),
                     .tenant = k.tenant->name,
                     .id = item->id,
                     .enqueued_at = item->enqueued_at,
                     .counter = k.counter});
    }
  }
  return out;
}

}  // namespace kvgate::route
