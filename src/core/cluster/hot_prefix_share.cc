#include "core/cluster/hot_prefix_share.h"

#include <algorithm>
#include <cmath>

#include "core/cluster/wire.h"

namespace kvgate::cluster {
namespace {

constexpr uint8_t kVersion = 1;
constexpr uint64_t kMaxPrefixes = 4096;
constexpr uint64_t kMaxTokens = uint64_t{1} << 20;  // per prefix
constexpr uint64_t kMaxTextBytes = uint64_t{1} << 24;

}  // namespace

std::string encode_hot_prefixes(std::string_view replica, int64_t written_ms,
                                std::span<const kv::HotPrefix> prefixes) {
  std::string out;
  out.push_back(static_cast<char>(kVersion));
  wire::put_text(replica, out);
  wire::put_varint(static_cast<uint64_t>(std::max<int64_t>(0, written_ms)), out);
  wire::put_varint(prefixes.size(), out);
  for (const kv::HotPrefix& p : prefixes) {
    wire::put_key(p.key, out);
    wire::put_varint(p.blocks, out);
    wire::put_varint(static_cast<uint64_t>(std::llround(std::max(0.0, p.hits) * 1000)), out);
    wire::put_varint(p.token_ids.size(), out);
    for (kv::TokenId t : p.token_ids) wire::put_varint(t, out);
    wire::put_varint(p.text.size(), out);
    out.append(p.text);
  }
  return out;
}

Result<SharedHotPrefixes> decode_hot_prefixes(std::string_view in) {
  wire::Reader r(in);
  const uint8_t version = r.byte();
  if (!r.ok()) return Error("hot prefixes: empty");
  if (version != kVersion) return Error("hot prefixes: unknown version " + std::to_string(version));
  SharedHotPrefixes s;
  s.replica = r.text();
  s.written_ms = static_cast<int64_t>(r.varint() & ((uint64_t{1} << 62) - 1));
  const uint64_t n = r.varint();
  if (!r.ok() || n > kMaxPrefixes || n > r.remaining() / 12) {
    return Error("hot prefixes: malformed header");
  }
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    kv::HotPrefix& p = s.prefixes.emplace_back();
    p.key = r.key();
    p.blocks = r.u32();
    const uint64_t milli_hits = r.varint();
    if (milli_hits > (uint64_t{1} << 50)) return Error("hot prefixes: malformed prefix");
    p.hits = static_cast<double>(milli_hits) / 1000;
    const uint64_t tokens = r.varint();
    if (!r.ok() || tokens > kMaxTokens || tokens > r.remaining()) {
      return Error("hot prefixes: malformed prefix");
    }
    p.token_ids.reserve(tokens);
    for (uint64_t t = 0; t < tokens && r.ok(); ++t) p.token_ids.push_back(r.u32());
    const uint64_t bytes = r.varint();
    if (!r.ok() || bytes > kMaxTextBytes || bytes > r.remaining()) {
      return Error("hot prefixes: malformed prefix");
    }
    p.text = std::string(r.raw(bytes));
  }
  if (!r.ok()) return Error("hot prefixes: truncated or malformed");
  if (!r.done()) return Error("hot prefixes: trailing bytes");
  return s;
}

}  // namespace kvgate::cluster
