#include "core/cluster/fleet_fairness.h"

#include <bit>
#include <cmath>

#include "core/cluster/wire.h"

namespace kvgate::cluster {
namespace {

constexpr uint8_t kVersion = 1;
constexpr uint64_t kMaxTenants = 1 << 20;

}  // namespace

void encode(const ServiceReport& report, std::string& out) {
  out.push_back(static_cast<char>(kVersion));
  wire::put_text(report.replica, out);
  wire::put_text(report.pool, out);
  wire::put_varint(report.seq, out);
  wire::put_varint(report.tenants.size(), out);
  for (const TenantService& t : report.tenants) {
    wire::put_text(t.tenant, out);
    wire::put_key(std::bit_cast<uint64_t>(t.service), out);
  }
}

std::string encode(const ServiceReport& report) {
  std::string out;
  encode(report, out);
  return out;
}

Result<ServiceReport> decode_service_report(std::string_view in) {
  wire::Reader r(in);
  const uint8_t version = r.byte();
  if (!r.ok()) return Error("service report: empty");
  if (version != kVersion) {
    return Error("service report: unknown version " + std::to_string(version));
  }
  ServiceReport report;
  report.replica = r.text();
  report.pool = r.text();
  report.seq = r.varint();
  const uint64_t n = r.varint();
  // Each tenant takes at least 9 bytes (an empty name's length and the double).
  if (!r.ok() || n > kMaxTenants || n > r.remaining() / 9) {
    return Error("service report: malformed header");
  }
  report.tenants.reserve(n);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    TenantService& t = report.tenants.emplace_back();
    t.tenant = r.text();
    t.service = std::bit_cast<double>(static_cast<uint64_t>(r.key()));
    if (r.ok() && !std::isfinite(t.service)) return Error("service report: service not finite");
  }
  if (!r.ok()) return Error("service report: truncated or malformed");
  if (!r.done()) return Error("service report: trailing bytes");
  return report;
}

FleetFairness::FleetFairness(route::FlowQueue& queue, std::string self, std::string pool,
                             Options options)
    : queue_(queue), self_(std::move(self)), pool_(std::move(pool)), peers_(options.peer_timeout) {
  queue_.track_service(true);
}

std::optional<ServiceReport> FleetFairness::take(bool heartbeat) {
  scratch_.clear();
  queue_.take_service(scratch_);
  if (scratch_.empty() && !heartbeat) return std::nullopt;
  ServiceReport r;
  r.replica = self_;
  r.pool = pool_;
  r.seq = next_seq_++;
  r.tenants.reserve(scratch_.size());
  for (const auto& [tenant, service] : scratch_) {
    r.tenants.push_back({std::string(tenant), service});
  }
  ++stats_.reports_published;
  return r;
}

void FleetFairness::apply(const ServiceReport& report, Nanos now) {
  if (report.replica == self_) return;
  Peer& peer = peers_.heard(report.replica, now);
  if (peer.last_seq != 0 && report.seq > peer.last_seq + 1) {
    stats_.gaps += report.seq - peer.last_seq - 1;
  }
  // A sequence that starts over is a peer that restarted: its deltas count as ever.
  peer.last_seq = report.seq;
  fallen_back_ = false;
  ++stats_.reports_applied;
  for (const TenantService& t : report.tenants) {
    if (!std::isfinite(t.service) || t.service == 0) continue;
    queue_.add_peer_service(t.tenant, t.service);
    peer.service[t.tenant] += t.service;
    ++stats_.tenants_applied;
  }
}

void FleetFairness::expire(Nanos now) { stats_.dead_peers += peers_.expire(now); }

void FleetFairness::fall_back() {
  if (fallen_back_) return;
  fallen_back_ = true;
  ++stats_.fallbacks;
}

size_t FleetFairness::live_peers(Nanos now) const { return peers_.live(now); }

double FleetFairness::peer_service(std::string_view peer, std::string_view tenant) const {
  const Peer* p = peers_.find(peer);
  if (p == nullptr) return 0;
  auto t = p->service.find(std::string(tenant));
  return t == p->service.end() ? 0 : t->second;
}

}  // namespace kvgate::cluster
