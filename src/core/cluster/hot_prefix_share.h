// A gateway replica's hot prefixes as its peers read them (docs/replicas.md): each replica
// now and then publishes its kv::HotPrefixes::top() (the prefixes themselves, token ids
// or text, since a warm-up replays them) in PREFIX:hot:POOL, one hash field per replica;
// a warm-up merges its own with its peers' (kv::merge_hot_prefixes), so that a new engine
// is warmed with the fleet's hot prefixes, not one replica's share of the traffic.
//
//   std::string wire = encode_hot_prefixes("gw-1", now_ms, warmup.top(16));  // HSET
//   Result<SharedHotPrefixes> back = decode_hot_prefixes(wire);        // HGETALL
//
// Deterministic; thread-safety: none.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/kv/hot_prefixes.h"

namespace kvgate::cluster {

struct SharedHotPrefixes {
  std::string replica;
  int64_t written_ms = 0;  // wall clock (Unix ms) when published: readers skip stale lists
  std::vector<kv::HotPrefix> prefixes;
};

// Compact binary form: varints (token ids, lengths), keys as 8 bytes, hits as 1/1000ths.
std::string encode_hot_prefixes(std::string_view replica, int64_t written_ms,
                                std::span<const kv::HotPrefix> prefixes);
Result<SharedHotPrefixes> decode_hot_prefixes(std::string_view wire);

}  // namespace kvgate::cluster
