#include "core/discovery/reconciler.h"

#include <cassert>
#include <set>
#include <utility>

namespace kvgate::discovery {

bool same_endpoint(const DiscoveredEndpoint& a, const DiscoveredEndpoint& b) {
  const route::EndpointSpec& x = a.spec;
  const route::EndpointSpec& y = b.spec;
  return x.url == y.url && x.role == y.role && x.zone == y.zone && x.rack == y.rack &&
         x.labels == y.labels && x.kv_capacity_blocks == y.kv_capacity_blocks &&
         a.kv_events == b.kv_events;
}

std::string_view to_string(Action::Kind kind) {
  switch (kind) {
    case Action::Kind::kAdd:
      return "add";
    case Action::Kind::kSuspend:
      return "suspend";
    case Action::Kind::kResume:
      return "resume";
    case Action::Kind::kRemove:
      return "remove";
  }
  return "?";
}

Reconciler::Reconciler(ReconcilerConfig config) : config_(config) {}

size_t Reconciler::add_source(std::string name) {
  assert(sources_.size() < 64);
  sources_.push_back(Source{.name = std::move(name)});
  return sources_.size() - 1;
}

std::vector<Action> Reconciler::report(size_t source, Nanos now,
                                       std::vector<DiscoveredEndpoint> set, bool resync) {
  Source& s = sources_.at(source);
  std::vector<Action> out;
  if (set.empty() && s.had_endpoints && config_.hold_empty) {
    if (s.empty_since < 0) s.empty_since = now;
    if (config_.hold_empty_max <= 0 || now - s.empty_since < config_.hold_empty_max) {
      ++s.stats.held_empty;
      s.stats.last_success = now;
      return out;
    }
  }
  s.empty_since = -1;
  std::map<std::string, DiscoveredEndpoint, std::less<>> next;
  for (DiscoveredEndpoint& e : set) {
    if (!e.ready) continue;
    std::string url = e.spec.url;
    next.emplace(std::move(url), std::move(e));  // the first of a URL wins
  }
  // The URLs whose wanted state may change: those in the old set or the new one.
  std::set<std::string, std::less<>> touched;
  uint64_t differences = 0;
  for (const auto& [url, e] : s.set) {
    touched.insert(url);
    auto it = next.find(url);
    if (it == next.end() || !same_endpoint(e, it->second)) ++differences;
  }
  for (const auto& [url, e] : next) {
    if (touched.insert(url).second) ++differences;
  }
  if (resync) s.stats.resync_differences += differences;
  s.set = std::move(next);
  s.had_endpoints = !s.set.empty();
  ++s.stats.reports;
  s.stats.last_success = now;
  s.stats.endpoints = s.set.size();
  for (const std::string& url : touched) reconcile(url, source, now, out);
  return out;
}

void Reconciler::report_error(size_t source, Nanos now, std::string message) {
  Source& s = sources_.at(source);
  ++s.stats.errors;
  s.stats.last_error = now;
  s.stats.last_error_message = std::move(message);
}

void Reconciler::emit(std::vector<Action>& out, Action::Kind kind, const DiscoveredEndpoint& e,
                      size_t cause) {
  ++sources_.at(cause).stats.changes;
  out.push_back(Action{.kind = kind, .endpoint = e, .source = sources_.at(cause).name});
}

void Reconciler::reconcile(const std::string& url, size_t cause, Nanos now,
                           std::vector<Action>& out) {
  // The wanted endpoint: from the first source (in configuration order) that reports it.
  const DiscoveredEndpoint* want = nullptr;
  size_t from = 0;
  for (size_t i = 0; i < sources_.size() && !want; ++i) {
    auto it = sources_[i].set.find(url);
    if (it != sources_[i].set.end()) {
      want = &it->second;
      from = i;
    }
  }
  auto it = entries_.find(url);
  if (!want) {
    if (it == entries_.end() || it->second.suspended) return;
    Entry& entry = it->second;
    if (config_.grace <= 0) {
      emit(out, Action::Kind::kRemove, entry.endpoint, cause);
      entries_.erase(it);
      return;
    }
    entry.suspended = true;
    entry.missing_since = now;
    emit(out, Action::Kind::kSuspend, entry.endpoint, cause);
    return;
  }
  if (it == entries_.end()) {
    entries_.emplace(url, Entry{.endpoint = *want, .owner = from});
    emit(out, Action::Kind::kAdd, *want, cause);
    return;
  }
  Entry& entry = it->second;
  if (!same_endpoint(entry.endpoint, *want)) {
    // An endpoint's spec is fixed once added: a new role, zone or KV address is a new
    // endpoint at the same URL.
    emit(out, Action::Kind::kRemove, entry.endpoint, cause);
    entry = Entry{.endpoint = *want, .owner = from};
    emit(out, Action::Kind::kAdd, *want, cause);
    return;
  }
  if (entry.suspended) {
    entry.suspended = false;
    entry.missing_since = -1;
    emit(out, Action::Kind::kResume, entry.endpoint, cause);
  }
}

std::vector<Action> Reconciler::tick(Nanos now) {
  std::vector<Action> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    if (e.suspended && now - e.missing_since >= config_.grace) {
      emit(out, Action::Kind::kRemove, e.endpoint, e.owner);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<Nanos> Reconciler::next_deadline() const {
  std::optional<Nanos> next;
  for (const auto& [url, e] : entries_) {
    if (!e.suspended) continue;
    const Nanos at = e.missing_since + config_.grace;
    if (!next || at < *next) next = at;
  }
  return next;
}

void Reconciler::add_failed(const std::string& url) { entries_.erase(url); }

std::vector<EntryView> Reconciler::entries() const {
  std::vector<EntryView> out;
  for (const auto& [url, e] : entries_) {
    EntryView v{.url = url, .suspended = e.suspended, .missing_since = e.missing_since};
    for (const Source& s : sources_) {
      if (s.set.contains(url)) v.sources.push_back(s.name);
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string Reconciler::owner(std::string_view url) const {
  auto it = entries_.find(url);
  return it == entries_.end() ? std::string() : sources_.at(it->second.owner).name;
}

}  // namespace kvgate::discovery
