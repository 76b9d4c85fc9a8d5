#include "core/route/lora_placement.h"

#include <algorithm>
#include <iterator>

namespace kvgate::route {

Status LoraPlacementConfig::validate() const {
  if (interval <= 0) return Error("lora_placement.interval_ms: must be > 0");
  if (idle_unload <= 0) return Error("lora_placement.idle_unload_ms: must be > 0");
  if (!(replica_demand > 0)) return Error("lora_placement.replica_demand: must be > 0");
  if (load_backoff < 0) return Error("lora_placement.backoff_ms: must be >= 0");
  if (max_wait < 0) return Error("lora_placement.max_wait_ms: must be >= 0");
  if (default_slots == 0) return Error("lora_placement.default_slots: must be >= 1");
  return {};
}

std::string_view to_string(LoraAction::Kind kind) {
  switch (kind) {
    case LoraAction::Kind::kLoad:
      return "load";
    case LoraAction::Kind::kUnload:
      return "unload";
  }
  return "load";
}

namespace {

bool holds(const LoraEndpointState& e, std::string_view adapter) {
  return std::any_of(e.loaded.begin(), e.loaded.end(),
                     [adapter](const LoraEndpointState::Held& h) { return h.adapter == adapter; });
}

bool backing_off(const LoraEndpointState& e, std::string_view adapter) {
  return std::find(e.backoff.begin(), e.backoff.end(), adapter) != e.backoff.end();
}

// One round's working state: which endpoints already have an action, and the unloads
// planned so far (an adapter's replicas once they are done).
class Round {
 public:
  Round(const LoraPlacementConfig& config, std::span<const LoraEndpointState> endpoints,
        std::span<const AdapterDemand> demand, Nanos now)
      : config_(config), endpoints_(endpoints), demand_(demand), now_(now) {
    taken_.reserve(endpoints.size());
    for (const LoraEndpointState& e : endpoints) taken_.push_back(e.busy || !e.routable);
  }

  std::vector<LoraAction> run() {
    unload_idle();
    place();
    return std::move(out_);
  }

 private:
  const AdapterDemand* demand_of(std::string_view adapter) const {
    for (const AdapterDemand& d : demand_) {
      if (d.name == adapter) return &d;
    }
    return nullptr;
  }
  // Endpoints holding or loading `adapter`, less the unloads of it planned this round.
  int replicas(std::string_view adapter) const {
    int n = 0;
    for (const LoraEndpointState& e : endpoints_) {
      n += holds(e, adapter) || (e.loading && *e.loading == adapter);
    }
    for (const LoraAction& a : out_) {
      n -= a.kind == LoraAction::Kind::kUnload && a.adapter == adapter;
    }
    return n;
  }
  bool loading_anywhere(std::string_view adapter) const {
    for (const LoraEndpointState& e : endpoints_) {
      if (e.loading && *e.loading == adapter) return true;
    }
    for (const LoraAction& a : out_) {
      if (a.kind == LoraAction::Kind::kLoad && a.adapter == adapter) return true;
    }
    return false;
  }
  // Whether `h` may leave its endpoint: not in use there, unused for `unused_for`, and not
  // the last replica of an adapter that has demand.
  bool may_unload(const LoraEndpointState::Held& h, Nanos unused_for) const {
    if (h.active || now_ - h.last_used < unused_for) return false;
    const AdapterDemand* d = demand_of(h.adapter);
    return !(d && d->wanted() && replicas(h.adapter) <= 1);
  }
  void add(size_t i, LoraAction::Kind kind, std::string adapter) {
    out_.push_back({.kind = kind, .endpoint = endpoints_[i].id, .adapter = std::move(adapter)});
    taken_[i] = true;
  }

  // Rule 1: on each endpoint, the adapter idle longest beyond idle_unload.
  void unload_idle() {
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      if (taken_[i]) continue;
      const LoraEndpointState::Held* victim = nullptr;
      for (const LoraEndpointState::Held& h : endpoints_[i].loaded) {
        if (!may_unload(h, config_.idle_unload)) continue;
        if (!victim || h.last_used < victim->last_used) victim = &h;
      }
      if (victim) add(i, LoraAction::Kind::kUnload, victim->adapter);
    }
  }

  // Rules 2 and 3: adapters with demand, the most waited for first.
  void place() {
    std::vector<const AdapterDemand*> order;
    for (const AdapterDemand& d : demand_) {
      if (d.wanted()) order.push_back(&d);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const AdapterDemand* a, const AdapterDemand* b) {
                       if (a->waiting != b->waiting) return a->waiting > b->waiting;
                       return a->rate > b->rate;
                     });
    for (const AdapterDemand* d : order) {
      if (loading_anywhere(d->name)) continue;  // one replica at a time
      const int have = replicas(d->name);
      const bool want = have <= 0 || (have < static_cast<int>(d->max_replicas) &&
                                      d->rate / have > config_.replica_demand);
      if (want) place_one(d->name);
    }
  }

  // A new replica of `adapter`: the least loaded endpoint with a free slot, else the one
  // whose least recently used adapter is idle (unloaded now, the load in a later round).
  void place_one(const std::string& adapter) {
    std::optional<size_t> with_slot, evict;
    const LoraEndpointState::Held* victim = nullptr;
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      const LoraEndpointState& e = endpoints_[i];
      if (taken_[i] || e.slots == 0 || holds(e, adapter) || backing_off(e, adapter)) continue;
      if (e.loaded.size() < e.slots) {
        if (!with_slot || e.load < endpoints_[*with_slot].load) with_slot = i;
        continue;
      }
      const LoraEndpointState::Held* lru = nullptr;
      for (const LoraEndpointState::Held& h : e.loaded) {
        if (!lru || h.last_used < lru->last_used) lru = &h;
      }
      if (!lru || !may_unload(*lru, config_.interval)) continue;
      if (!evict || lru->last_used < victim->last_used ||
          (lru->last_used == victim->last_used && e.load < endpoints_[*evict].load)) {
        evict = i;
        victim = lru;
      }
    }
    if (with_slot) {
      add(*with_slot, LoraAction::Kind::kLoad, adapter);
    } else if (evict) {
      add(*evict, LoraAction::Kind::kUnload, victim->adapter);
    }
  }

  const LoraPlacementConfig& config_;
  std::span<const LoraEndpointState> endpoints_;
  std::span<const AdapterDemand> demand_;
  const Nanos now_;
  std::vector<bool> taken_;  // by index in endpoints_: busy, not routable, or planned
  std::vector<LoraAction> out_;
};

}  // namespace

std::vector<LoraAction> plan_lora(const LoraPlacementConfig& config,
                                  std::span<const LoraEndpointState> endpoints,
                                  std::span<const AdapterDemand> demand, Nanos now) {
  return Round(config, endpoints, demand, now).run();
}

std::vector<LoraAction> LoraPlacement::plan(std::span<const LoraEndpointView> endpoints,
                                            std::span<const AdapterDemand> demand, Nanos now) {
  // Endpoints gone take what was known of them, their actions in flight included.
  for (auto it = known_.begin(); it != known_.end();) {
    const EndpointId id = it->first;
    const bool present = std::any_of(endpoints.begin(), endpoints.end(),
                                     [id](const LoraEndpointView& v) { return v.id == id; });
    it = present ? std::next(it) : known_.erase(it);
  }
  std::vector<LoraEndpointState> states;
  states.reserve(endpoints.size());
  for (const LoraEndpointView& v : endpoints) {
    Known& k = known_[v.id];
    std::erase_if(k.backoff, [now](const auto& b) { return b.second <= now; });
    // What its requests use is loaded there, whoever loaded it (--lora-modules, another
    // gateway replica), and in use now.
    for (const std::vector<std::string>* names : {&v.activity.running, &v.activity.waiting}) {
      for (const std::string& a : *names) k.loaded.insert_or_assign(a, now);
    }
    LoraEndpointState s;
    s.id = v.id;
    s.routable = v.routable;
    s.slots = v.activity.max_loras > 0 ? v.activity.max_loras : config_.default_slots;
    s.load = v.load;
    for (const auto& [adapter, used] : k.loaded) {
      s.loaded.push_back(
          {.adapter = adapter, .last_used = used, .active = v.activity.active(adapter)});
    }
    s.busy = k.in_flight.has_value();
    if (k.in_flight && k.in_flight->kind == LoraAction::Kind::kLoad)
      s.loading = k.in_flight->adapter;
    for (const auto& [adapter, until] : k.backoff) s.backoff.push_back(adapter);
    states.push_back(std::move(s));
  }
  std::vector<LoraAction> actions = plan_lora(config_, states, demand, now);
  for (const LoraAction& a : actions) known_[a.endpoint].in_flight = a;
  return actions;
}

void LoraPlacement::on_done(const LoraAction& action, bool ok, Nanos now) {
  auto it = known_.find(action.endpoint);
  if (it == known_.end()) return;
  Known& k = it->second;
  if (!k.in_flight || !(*k.in_flight == action)) return;
  k.in_flight.reset();
  switch (action.kind) {
    case LoraAction::Kind::kLoad:
      if (ok) {
        k.loaded.insert_or_assign(action.adapter, now);
        k.backoff.erase(action.adapter);
      } else {
        k.backoff.insert_or_assign(action.adapter, now + config_.load_backoff);
      }
      break;
    case LoraAction::Kind::kUnload:
      k.loaded.erase(action.adapter);
      break;
  }
}

void LoraPlacement::on_routed(EndpointId endpoint, std::string_view adapter, Nanos now) {
  auto it = known_.find(endpoint);
  if (it == known_.end()) return;
  auto h = it->second.loaded.find(adapter);
  if (h != it->second.loaded.end()) h->second = std::max(h->second, now);
}

LoraPlaced LoraPlacement::placed(EndpointId endpoint) const {
  LoraPlaced p;
  auto it = known_.find(endpoint);
  if (it == known_.end()) return p;
  const Known& k = it->second;
  const bool unloading = k.in_flight && k.in_flight->kind == LoraAction::Kind::kUnload;
  for (const auto& [adapter, used] : k.loaded) {
    // Going away: no new request is sent there.
    if (unloading && k.in_flight->adapter == adapter) continue;
    p.loaded.push_back(adapter);
  }
  if (k.in_flight && k.in_flight->kind == LoraAction::Kind::kLoad) {
    p.loading.push_back(k.in_flight->adapter);
  }
  return p;
}

bool LoraPlacement::loaded_anywhere(std::string_view adapter) const {
  for (const auto& [id, k] : known_) {
    if (!k.loaded.contains(adapter)) continue;
    const bool unloading = k.in_flight && k.in_flight->kind == LoraAction::Kind::kUnload &&
                           k.in_flight->adapter == adapter;
    if (!unloading) return true;
  }
  return false;
}

size_t LoraPlacement::in_flight() const {
  size_t n = 0;
  for (const auto& [id, k] : known_) n += k.in_flight.has_value();
  return n;
}

std::vector<LoraEndpointView> lora_views(const EndpointPool& pool) {
  std::vector<LoraEndpointView> views;
  views.reserve(pool.ids().size());
  for (EndpointId id : pool.ids()) {
    const Endpoint* e = pool.get(id);
    if (!e) continue;
    LoraEndpointView v;
    v.id = id;
    v.routable = e->health == Health::kHealthy;
    v.load = static_cast<double>(e->load.in_flight);
    if (e->metrics) {
      v.load += e->metrics->waiting;
      v.activity = e->metrics->lora;
    }
    views.push_back(std::move(v));
  }
  return views;
}

}  // namespace kvgate::route
