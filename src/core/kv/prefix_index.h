// PrefixIndex: which endpoints hold how much of a prompt in their KV cache.
//
// Two implementations share this interface: PreciseIndex (fed by the engines' KV
// events) and ApproxIndex (fed by the router's own decisions). A router may use either,
// or both and take per endpoint the larger match (merge_matches).
//
// Thread-safety: none. An index is owned by the router's strand (DESIGN.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/common/time.h"
#include "core/kv/block_hash.h"

namespace kvgate::kv {

// Dense endpoint ids, assigned by the caller (the router), small and reused.
using EndpointId = uint32_t;
inline constexpr EndpointId kMaxEndpoints = 65535;

// Where an engine holds a block (vLLM's `medium`; event_apply.h maps the strings).
enum class Medium : uint8_t { kGpu = 1, kCpu = 2, kDisk = 4 };

// How much of a request one endpoint holds.
struct EndpointMatch {
  EndpointId endpoint = 0;
  // Leading blocks of the request held in GPU memory: prefill skips these for free.
  uint32_t gpu_blocks = 0;
  // Leading blocks held in any tier: the GPU run, then blocks the engine can load from
  // CPU memory or disk. Always >= gpu_blocks.
  uint32_t total_blocks = 0;
  // Of the blocks after the GPU run (total_blocks - gpu_blocks), those held on disk only
  // (slower to load than the rest, which are in CPU memory). 0 without a disk tier.
  uint32_t disk_blocks = 0;

  EndpointMatch() = default;
  constexpr EndpointMatch(EndpointId e, uint32_t gpu, uint32_t total, uint32_t disk = 0)
      : endpoint(e), gpu_blocks(gpu), total_blocks(total), disk_blocks(disk) {}
  bool operator==(const EndpointMatch&) const = default;
};

class PrefixIndex {
 public:
  virtual ~PrefixIndex() = default;

  // Appends to `out` one entry per endpoint that holds at least the first block of
  // `keys`, in no particular order. Stops walking as soon as no endpoint holds the next
  // block. The precise index counts this as a use of the matched keys for its LRU; the
  // approximate one refreshes TTLs only in record(), when a request is actually routed.
  virtual void match(std::span<const BlockKey> keys, Nanos now,
                     std::vector<EndpointMatch>& out) = 0;

  // Forgets everything `endpoint` holds. Its id may then be reused.
  virtual void remove_endpoint(EndpointId endpoint) = 0;

  // Bytes of memory the index uses (its tables, not counting the object itself).
  virtual size_t memory_bytes() const = 0;

  // Distinct blocks and (block, endpoint) pairs currently held.
  virtual size_t distinct_blocks() const = 0;
  virtual size_t held_pairs() const = 0;
};

// Merges `b` into `a`, keeping per endpoint the larger gpu and total counts, and the
// disk count of the match with the larger total (the smaller one when they tie).
void merge_matches(std::vector<EndpointMatch>& a, std::span<const EndpointMatch> b);

}  // namespace kvgate::kv
