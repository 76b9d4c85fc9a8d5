#include "core/cluster/index_snapshot.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "core/cluster/wire.h"

namespace kvgate::cluster {
namespace {

constexpr uint8_t kVersion = 1;
constexpr uint64_t kMaxEndpoints = 1 << 16;
constexpr uint64_t kMaxHolders = 1 << 16;

}  // namespace

IndexSnapshot take_snapshot(const kv::ApproxIndex& index, const route::EndpointPool& pool,
                            Nanos now, std::string replica, std::string stream_id) {
  IndexSnapshot s;
  s.replica = std::move(replica);
  s.stream_id = std::move(stream_id);
  std::vector<kv::ApproxIndex::Held> held;
  index.export_pairs(now, held);
  std::unordered_map<kv::EndpointId, uint32_t> slot;  // pool id -> index in s.endpoints
  s.pairs.reserve(held.size());
  for (const kv::ApproxIndex::Held& h : held) {
    auto it = slot.find(h.endpoint);
    if (it == slot.end()) {
      const route::Endpoint* e = pool.get(h.endpoint);
      if (e == nullptr) continue;
      it = slot.emplace(h.endpoint, static_cast<uint32_t>(s.endpoints.size())).first;
      s.endpoints.push_back(e->spec.url);
    }
    s.pairs.push_back({h.key, h.depth, it->second, now - h.last_use});
  }
  return s;
}

RestoreStats restore_snapshot(const IndexSnapshot& s, kv::ApproxIndex& index,
                              const route::EndpointPool& pool, Nanos now, Nanos elapsed) {
  RestoreStats out;
  std::vector<std::optional<route::EndpointId>> ids;
  ids.reserve(s.endpoints.size());
  for (const std::string& url : s.endpoints) ids.push_back(pool.find(url));
  for (const IndexSnapshot::Pair& p : s.pairs) {
    if (p.endpoint >= ids.size() || !ids[p.endpoint]) {
      ++out.unknown_endpoint;
      continue;
    }
    const kv::ApproxIndex::Held h{p.key, p.depth, *ids[p.endpoint],
                                  now - std::max<Nanos>(0, elapsed) - p.age};
    if (index.restore(h, now)) {
      ++out.restored;
    } else {
      ++out.expired;
    }
  }
  return out;
}

std::string encode(const IndexSnapshot& s) {
  std::string out;
  out.push_back(static_cast<char>(kVersion));
  wire::put_text(s.replica, out);
  wire::put_text(s.stream_id, out);
  wire::put_varint(s.endpoints.size(), out);
  for (const std::string& url : s.endpoints) wire::put_text(url, out);
  // Runs of pairs with the same block: key, depth, holder count, then (endpoint, age ms).
  size_t runs = 0;
  for (size_t i = 0; i < s.pairs.size(); ++i) {
    runs += i == 0 || s.pairs[i].key != s.pairs[i - 1].key;
  }
  wire::put_varint(runs, out);
  for (size_t i = 0; i < s.pairs.size();) {
    size_t j = i + 1;
    while (j < s.pairs.size() && s.pairs[j].key == s.pairs[i].key && j - i < kMaxHolders) ++j;
    wire::put_key(s.pairs[i].key, out);
    wire::put_varint(s.pairs[i].depth, out);
    wire::put_varint(j - i, out);
    for (size_t k = i; k < j; ++k) {
      wire::put_varint(s.pairs[k].endpoint, out);
      wire::put_varint(static_cast<uint64_t>(std::max<Nanos>(0, s.pairs[k].age) / kMillisecond),
                       out);
    }
    i = j;
  }
  return out;
}

Result<IndexSnapshot> decode_snapshot(std::string_view in) {
  wire::Reader r(in);
  const uint8_t version = r.byte();
  if (!r.ok()) return Error("index snapshot: empty");
  if (version != kVersion)
    return Error("index snapshot: unknown version " + std::to_string(version));
  IndexSnapshot s;
  s.replica = r.text();
  s.stream_id = r.text();
  const uint64_t endpoints = r.varint();
  if (!r.ok() || endpoints > kMaxEndpoints) return Error("index snapshot: malformed header");
  for (uint64_t i = 0; i < endpoints && r.ok(); ++i) s.endpoints.push_back(r.text());
  const uint64_t runs = r.varint();
  // Each run takes at least 11 bytes: a claim beyond what is left is malformed.
  if (!r.ok() || runs > r.remaining() / 11) return Error("index snapshot: malformed header");
  for (uint64_t i = 0; i < runs && r.ok(); ++i) {
    const kv::BlockKey key = r.key();
    const uint32_t depth = r.u32();
    const uint64_t holders = r.varint();
    if (!r.ok() || holders == 0 || holders > kMaxHolders || holders > r.remaining() / 2) {
      return Error("index snapshot: malformed block");
    }
    for (uint64_t k = 0; k < holders && r.ok(); ++k) {
      const uint32_t endpoint = r.u32();
      const uint64_t age_ms = r.varint();
      if (endpoint >= s.endpoints.size() || age_ms > (uint64_t{1} << 40)) {
        return Error("index snapshot: malformed holder");
      }
      s.pairs.push_back({key, depth, endpoint, static_cast<Nanos>(age_ms) * kMillisecond});
    }
  }
  if (!r.ok()) return Error("index snapshot: truncated or malformed");
  if (!r.done()) return Error("index snapshot: trailing bytes");
  return s;
}

}  // namespace kvgate::cluster
