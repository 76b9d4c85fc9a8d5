#include "core/kv/event_apply.h"

namespace kvgate::kv {
namespace {

Medium to_medium(const std::optional<std::string>& m) {
  return m && *m == "CPU" ? Medium::kCpu : Medium::kGpu;
}

}  // namespace

void apply_events(PreciseIndex& index, EndpointId endpoint, std::span<const KvEvent> events) {
  for (const KvEvent& ev : events) {
    if (const auto* s = std::get_if<BlockStored>(&ev)) {
      BlockStoredEvent e;
      e.block_hashes = s->block_hashes;
      e.parent_block_hash = s->parent_block_hash;
      e.token_ids = s->token_ids;
      e.block_size = s->block_size;
      if (s->lora_name) e.lora_name = *s->lora_name;
      if (s->cache_salt) e.cache_salt = *s->cache_salt;
      e.medium = to_medium(s->medium);
      index.apply_stored(endpoint, e);
    } else if (const auto* r = std::get_if<BlockRemoved>(&ev)) {
      index.apply_removed(endpoint,
                          {.block_hashes = r->block_hashes, .medium = to_medium(r->medium)});
    } else {
      index.apply_all_cleared(endpoint);
    }
  }
}

}  // namespace kvgate::kv
