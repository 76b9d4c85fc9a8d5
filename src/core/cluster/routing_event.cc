#include "core/cluster/routing_event.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/cluster/wire.h"

namespace kvgate::cluster {
namespace {

constexpr uint8_t kVersion = 1;
constexpr uint8_t kSessionsVersion = 1;  // encode_sessions()' form
// Bounds a malformed input cannot exceed (a batch is published every few milliseconds).
constexpr uint64_t kMaxEvents = 1 << 20;

using wire::put_text;
using wire::put_varint;
using wire::Reader;

// A duration sent in microseconds, in nanoseconds; more than 2^40 us (12 days) is
// malformed (and would overflow).
Nanos micros(Reader& r) {
  const uint64_t us = r.varint();
  if (us > (uint64_t{1} << 40)) {
    r.fail();
    return 0;
  }
  return static_cast<Nanos>(us) * 1000;
}

}  // namespace

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::kRouted:
      return "routed";
    case EventKind::kPrefillDone:
      return "prefill_done";
    case EventKind::kFinished:
      return "finished";
    case EventKind::kFailed:
      return "failed";
  }
  return "?";
}

RoutingEvent RoutingEvent::routed(uint64_t request, std::string endpoint,
                                  std::span<const kv::BlockKey> keys, uint32_t prompt_tokens,
                                  uint32_t expected_output_tokens) {
  RoutingEvent e;
  e.kind = EventKind::kRouted;
  e.request = request;
  e.endpoint = std::move(endpoint);
  e.keys.assign(keys.begin(), keys.end());
  e.prompt_tokens = prompt_tokens;
  e.expected_output_tokens = expected_output_tokens;
  return e;
}

RoutingEvent RoutingEvent::load(EventKind kind, uint64_t request, uint32_t output_tokens) {
  RoutingEvent e;
  e.kind = kind;
  e.request = request;
  e.output_tokens = output_tokens;
  return e;
}

void encode(const EventBatch& batch, std::string& out) {
  out.push_back(static_cast<char>(kVersion));
  put_text(batch.replica, out);
  put_text(batch.pool, out);
  put_varint(batch.seq, out);
  put_varint(static_cast<uint64_t>(std::max<Nanos>(0, batch.age) / 1000), out);
  put_varint(batch.events.size(), out);
  for (const RoutingEvent& e : batch.events) {
    out.push_back(static_cast<char>(e.kind));
    put_varint(e.request, out);
    if (e.kind != EventKind::kRouted) {
      put_varint(e.output_tokens, out);
      continue;
    }
    put_text(e.endpoint, out);
    put_text(e.prefill_endpoint, out);
    put_varint(e.prompt_tokens, out);
    put_varint(e.expected_output_tokens, out);
    put_varint(e.prefill_tokens, out);
    put_varint(static_cast<uint64_t>(std::max<Nanos>(0, e.predicted_prefill) / 1000), out);
    put_varint(e.keys.size(), out);
    const size_t at = out.size();
    out.resize(at + 8 * e.keys.size());
    char* p = out.data() + at;
    for (kv::BlockKey k : e.keys) {
      for (int b = 0; b < 8; ++b) *p++ = static_cast<char>((k >> (8 * b)) & 0xFF);
    }
  }
}

std::string encode(const EventBatch& batch) {
  std::string out;
  encode(batch, out);
  return out;
}

void encode_sessions(const EventBatch& batch, std::string& out) {
  size_t n = 0;
  for (const RoutingEvent& e : batch.events) {
    if (e.kind == EventKind::kRouted && e.session != 0) ++n;
  }
  if (n == 0) return;
  out.push_back(static_cast<char>(kSessionsVersion));
  put_varint(batch.seq, out);
  put_varint(n, out);
  for (size_t i = 0; i < batch.events.size(); ++i) {
    const RoutingEvent& e = batch.events[i];
    if (e.kind != EventKind::kRouted || e.session == 0) continue;
    put_varint(i, out);
    wire::put_key(e.session, out);
  }
}

Status decode_sessions(std::string_view in, EventBatch& batch) {
  Reader r(in);
  const uint8_t version = r.byte();
  if (!r.ok()) return Error("session bindings: empty");
  if (version != kSessionsVersion) {
    return Error("session bindings: unknown version " + std::to_string(version));
  }
  const uint64_t seq = r.varint();
  const uint64_t n = r.varint();
  if (!r.ok() || n > batch.events.size()) return Error("session bindings: malformed header");
  if (seq != batch.seq) return Error("session bindings: for another batch");
  std::vector<std::pair<uint64_t, uint64_t>> pairs;  // event index, session
  pairs.reserve(n);
  for (uint64_t k = 0; k < n && r.ok(); ++k) {
    const uint64_t i = r.varint();
    const uint64_t session = r.key();
    if (!r.ok()) break;
    if (i >= batch.events.size() || batch.events[i].kind != EventKind::kRouted) {
      return Error("session bindings: no routed event at index " + std::to_string(i));
    }
    pairs.emplace_back(i, session);
  }
  if (!r.ok()) return Error("session bindings: truncated or malformed");
  if (!r.done()) return Error("session bindings: trailing bytes");
  for (const auto& [i, session] : pairs) batch.events[i].session = session;
  return {};
}

std::optional<std::string_view> batch_replica(std::string_view wire) {
  Reader r(wire);
  if (r.byte() != kVersion) return std::nullopt;
  const uint64_t n = r.varint();
  if (!r.ok() || n > wire::kMaxText) return std::nullopt;
  const std::string_view replica = r.raw(n);
  if (!r.ok()) return std::nullopt;
  return replica;
}

Result<EventBatch> decode(std::string_view wire) {
  Reader r(wire);
  const uint8_t version = r.byte();
  if (!r.ok()) return Error("routing event batch: empty");
  if (version != kVersion) {
    return Error("routing event batch: unknown version " + std::to_string(version));
  }
  EventBatch b;
  b.replica = r.text();
  b.pool = r.text();
  b.seq = r.varint();
  b.age = micros(r);
  const uint64_t n = r.varint();
  if (!r.ok() || n > kMaxEvents) return Error("routing event batch: malformed header");
  b.events.reserve(n);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    RoutingEvent& e = b.events.emplace_back();
    const uint8_t kind = r.byte();
    if (kind < 1 || kind > 4) return Error("routing event batch: unknown event kind");
    e.kind = static_cast<EventKind>(kind);
    e.request = r.varint();
    if (e.kind != EventKind::kRouted) {
      e.output_tokens = r.u32();
      continue;
    }
    e.endpoint = r.text();
    e.prefill_endpoint = r.text();
    e.prompt_tokens = r.u32();
    e.expected_output_tokens = r.u32();
    e.prefill_tokens = r.u32();
    e.predicted_prefill = micros(r);
    r.keys(e.keys);
  }
  if (!r.ok()) return Error("routing event batch: truncated or malformed");
  if (!r.done()) return Error("routing event batch: trailing bytes");
  return b;
}

}  // namespace kvgate::cluster
