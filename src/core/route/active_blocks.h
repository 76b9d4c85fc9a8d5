// ActiveBlocks: which KV blocks the router's in-flight requests occupy on each endpoint.
//
// A request holds its prompt's blocks on the endpoint that decodes it until it ends.
// Requests that share a prefix (a system prompt, earlier turns) share those blocks in
// the engine's paged cache, so a block counts once per endpoint however many requests
// use it: this is a reference count per (block, endpoint).
//
// Because block keys are chained (kv/block_hash.h), a request holding key i holds keys
// 0..i-1 as well; so the blocks an endpoint holds for a prompt always form a prefix of
// it, and prefix() finds them for every endpoint by bisection, without walking the
// whole prompt.
//
// Thread-safety: none; owned by the router's strand.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/kv/prefix_index.h"

namespace kvgate::route {

class ActiveBlocks {
 public:
  struct Prefix {
    kv::EndpointId endpoint;
    uint32_t blocks;  // leading keys of the prompt the endpoint already holds
  };

  ActiveBlocks();
  ~ActiveBlocks();
  ActiveBlocks(const ActiveBlocks&) = delete;
  ActiveBlocks& operator=(const ActiveBlocks&) = delete;

  // Adds one reference to each key on `endpoint`; returns how many keys it did not
  // hold before.
  uint32_t add(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys);
  // Drops one reference to each key on `endpoint`; returns how many it no longer holds.
  // REQUIRES: the same keys were added to the same endpoint before.
  uint32_t release(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys);
  // Appends, for every endpoint holding at least keys[0], how many leading keys it
  // holds. Cost: O(log n) lookups per distinct prefix length among the endpoints, not
  // one per key (bisection; see the .cc).
  void prefix(std::span<const kv::BlockKey> keys, std::vector<Prefix>& out) const;
  // Distinct keys `endpoint` holds.
  uint64_t blocks(kv::EndpointId endpoint) const;
  // Forgets everything `endpoint` holds.
  void remove_endpoint(kv::EndpointId endpoint);
  // Distinct keys held by anyone.
  size_t size() const;

 private:
  struct Table;
  Table* table_;  // owned
  std::vector<uint64_t> per_endpoint_;
  mutable std::vector<uint32_t> stamp_;  // scratch for prefix()
  mutable uint32_t gen_ = 0;
};

}  // namespace kvgate::route
