#include "core/route/room_share.h"

#include <algorithm>
#include <cmath>

namespace kvgate::route {

std::string_view to_string(RoomShare share) {
  switch (share) {
    case RoomShare::kNone:
      return "none";
    case RoomShare::kSplit:
      return "split";
    case RoomShare::kDemand:
      return "demand";
  }
  return "none";
}

std::optional<RoomShare> parse_room_share(std::string_view text) {
  if (text == "none") return RoomShare::kNone;
  if (text == "split") return RoomShare::kSplit;
  if (text == "demand") return RoomShare::kDemand;
  return std::nullopt;
}

void room_shares(RoomShare share, uint32_t room, std::span<const uint32_t> demand,
                 std::span<double> out) {
  const size_t n = std::min(demand.size(), out.size());
  if (n == 0) return;
  const double f = room;
  double total = 0;
  size_t wanting = 0;  // replicas with demand
  for (size_t i = 0; i < n; ++i) {
    total += demand[i];
    wanting += demand[i] > 0 ? 1 : 0;
  }
  if (total <= f) {
    // Room for every replica's demand: each its demand and an equal part of the rest (a
    // request that arrives meanwhile at any replica finds a slot).
    const double rest = (f - total) / static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(demand[i]) + rest;
    return;
  }
  if (share == RoomShare::kNone) {  // FlowController never asks; equal parts
    for (size_t i = 0; i < n; ++i) out[i] = f / static_cast<double>(n);
    return;
  }
  if (share == RoomShare::kSplit) {
    // Water-filling: the level λ with Σ min(d_i, λ) = F. Replicas in order of demand:
    // those below the level take their demand, the rest share what is left equally.
    double left = f;
    size_t above = wanting;
    // Demands visited in increasing order without sorting (n is a handful of replicas):
    // repeatedly take the smallest demand not yet settled.
    std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), -1.0);
    for (size_t i = 0; i < n; ++i) {
      if (demand[i] == 0) out[i] = 0;
    }
    while (above > 0) {
      const double level = left / static_cast<double>(above);
      size_t settled = 0;
      for (size_t i = 0; i < n; ++i) {
        if (out[i] >= 0 || demand[i] > level) continue;
        out[i] = demand[i];
        left -= demand[i];
        ++settled;
      }
      above -= settled;
      if (settled == 0) {
        for (size_t i = 0; i < n; ++i) {
          if (out[i] < 0) out[i] = level;
        }
        break;
      }
    }
    return;
  }
  // kDemand: the floor of one slot for each replica with demand, then in proportion to
  // the demand beyond it; with less than one slot each, equal parts among them.
  const auto m = static_cast<double>(wanting);
  for (size_t i = 0; i < n; ++i) {
    if (demand[i] == 0) {
      out[i] = 0;
    } else if (f < m) {
      out[i] = f / m;
    } else {
      // total > f >= m, so total - m > 0.
      out[i] = 1 + (f - m) * (static_cast<double>(demand[i]) - 1) / (total - m);
    }
  }
}

uint32_t room_allotment(std::span<const double> shares, size_t index, double offset) {
  if (index >= shares.size()) return 0;
  double before = 0;
  for (size_t i = 0; i < index; ++i) before += shares[i];
  // A little slack so that sums that should be whole numbers are not cut just below one.
  constexpr double kSlack = 1e-9;
  const double lo = std::floor(before + offset + kSlack);
  const double hi = std::floor(before + shares[index] + offset + kSlack);
  return hi > lo ? static_cast<uint32_t>(hi - lo) : 0;
}

double room_offset(Nanos time, Nanos window) {
  const auto w = static_cast<uint64_t>(std::max<Nanos>(window, 1));
  // splitmix64 of the window's index: the same in every replica, different from window
  // to window.
  uint64_t z = static_cast<uint64_t>(time) / w + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace kvgate::route
