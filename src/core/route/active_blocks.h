// ActiveBlocks: which KV blocks the router's in-flight requests occupy on each endpoint.
//
// A request holds its prompt's blocks on the endpoint that decodes it until it ends.
// Requests that share a prefix (a system prompt, earlier turns) share those blocks in
// the engine's paged cache, so a block counts once per endpoint however many requests
// use it: this is a reference count per (block, endpoint).
//
// Because block keys are chained (kv/block_hash.h), a key stands for the whole prefix up
// to it: the blocks an endpoint holds for a prompt always form a prefix of it, and the
// prompts in flight form a tree. They are kept as one: a compressed trie of the prompts'
// key sequences, whose nodes carry, per endpoint, how many of its in-flight requests
// pass through them. A request's keys are compared against the trie's edges (a run of
// equal 8-byte words) and counted once per node on its path (two or three: the shared
// prefix, its own tail), not once per key; prefix() walks the same path. Nodes no
// request passes through are removed, and a node left with one child and no request
// ending at it is merged into that child, so the tree stays as small as the branching
// of the prompts in flight.
//
// The counts are exactly a per-(key, endpoint) reference count's for chained keys. Keys
// that are not chained (a test's small integers) are taken as sequences: a key counts
// per position in the tree, not once wherever it occurs.
//
// Thread-safety: none; owned by the router's strand.
#pragma once

#include <cstdint>
#include <memory>
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
  // REQUIRES: the same keys were added to the same endpoint before (a release that
  // matches no add changes nothing past where it stops matching).
  uint32_t release(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys);
  // Appends, for every endpoint holding at least keys[0], how many leading keys it
  // holds. Cost: one lookup per node on the prompt's path and a comparison of its keys.
  void prefix(std::span<const kv::BlockKey> keys, std::vector<Prefix>& out) const;
  // Distinct keys `endpoint` holds.
  uint64_t blocks(kv::EndpointId endpoint) const;
  // Forgets everything `endpoint` holds.
  void remove_endpoint(kv::EndpointId endpoint);
  // Distinct keys held by anyone.
  size_t size() const;

 private:
  struct Trie;
  std::unique_ptr<Trie> trie_;
  std::vector<uint64_t> per_endpoint_;
  mutable std::vector<uint32_t> reach_;  // scratch for prefix()
};

}  // namespace kvgate::route
