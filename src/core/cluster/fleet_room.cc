#include "core/cluster/fleet_room.h"

#include <string>
#include <utility>
#include <vector>

#include "core/cluster/wire.h"

namespace kvgate::cluster {
namespace {

constexpr uint8_t kVersion = 1;

}  // namespace

void encode(const DemandReport& report, std::string& out) {
  out.push_back(static_cast<char>(kVersion));
  wire::put_text(report.replica, out);
  wire::put_text(report.pool, out);
  wire::put_varint(report.seq, out);
  for (uint32_t q : report.queued) wire::put_varint(q, out);
}

std::string encode(const DemandReport& report) {
  std::string out;
  encode(report, out);
  return out;
}

Result<DemandReport> decode_demand_report(std::string_view in) {
  wire::Reader r(in);
  const uint8_t version = r.byte();
  if (!r.ok()) return Error("demand report: empty");
  if (version != kVersion) {
    return Error("demand report: unknown version " + std::to_string(version));
  }
  DemandReport report;
  report.replica = r.text();
  report.pool = r.text();
  report.seq = r.varint();
  for (uint32_t& q : report.queued) q = r.u32();
  if (!r.ok()) return Error("demand report: truncated or malformed");
  if (!r.done()) return Error("demand report: trailing bytes");
  return report;
}

FleetRoom::FleetRoom(route::FlowController& flow, std::string self, std::string pool,
                     Options options)
    : flow_(flow),
      self_(std::move(self)),
      pool_(std::move(pool)),
      options_(options),
      peers_(options.peer_timeout) {}

std::optional<DemandReport> FleetRoom::take(bool heartbeat) {
  std::array<uint32_t, route::kBands> queued{};
  for (size_t b = 0; b < route::kBands; ++b) {
    queued[b] = static_cast<uint32_t>(flow_.queue().band_size(static_cast<route::Criticality>(b)));
  }
  if (!heartbeat && last_sent_ && *last_sent_ == queued) return std::nullopt;
  last_sent_ = queued;
  ++stats_.reports_published;
  return DemandReport{.replica = self_, .pool = pool_, .seq = next_seq_++, .queued = queued};
}

void FleetRoom::apply(const DemandReport& report, Nanos now) {
  if (report.replica == self_) return;
  peers_.heard(report.replica, now) = report.queued;
  fallen_back_ = false;
  ++stats_.reports_applied;
  update();
}

void FleetRoom::expire(Nanos now) {
  const size_t dead = peers_.expire(now);
  stats_.dead_peers += dead;
  if (dead > 0) update();
}

void FleetRoom::fall_back() {
  if (fallen_back_) return;
  fallen_back_ = true;
  ++stats_.fallbacks;
  peers_.clear();
  update();
}

void FleetRoom::set_epoch_offset(Nanos offset) {
  // The two clocks drift apart by microseconds between calls: only a real step counts.
  const Nanos step = offset > epoch_offset_ ? offset - epoch_offset_ : epoch_offset_ - offset;
  if (step < kMillisecond) return;
  epoch_offset_ = offset;
  update();
}

void FleetRoom::update() {
  route::FlowController::RoomFleet fleet;
  fleet.self = self_;
  fleet.window = options_.window;
  fleet.epoch_offset = epoch_offset_;
  fleet.peers.reserve(peers_.size());
  for (const auto& [name, p] : peers_) fleet.peers.push_back({.replica = name, .queued = p.value});
  flow_.set_room_fleet(std::move(fleet));
}

}  // namespace kvgate::cluster
