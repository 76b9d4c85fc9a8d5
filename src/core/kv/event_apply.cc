#include "core/kv/event_apply.h"

#include <initializer_list>
#include <string_view>

namespace kvgate::kv {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 'a' + 'A') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// The spellings in use (header comment of event_apply.h), compared without case.
Medium to_medium(const std::optional<std::string>& m) {
  if (!m) return Medium::kGpu;
  for (std::string_view cpu : {"CPU", "CXL"}) {
    if (equals_ignoring_case(*m, cpu)) return Medium::kCpu;
  }
  for (std::string_view disk : {"DISK", "STORAGE", "SHARED_STORAGE"}) {
    if (equals_ignoring_case(*m, disk)) return Medium::kDisk;
  }
  return Medium::kGpu;
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
