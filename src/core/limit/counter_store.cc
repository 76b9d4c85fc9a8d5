#include "core/limit/counter_store.h"

namespace kvgate::limit {

Result<std::vector<int64_t>> MemoryCounterStore::get(std::span<const std::string> keys, Nanos now) {
  std::vector<int64_t> values;
  values.reserve(keys.size());
  for (const std::string& k : keys) {
    auto it = counters_.find(k);
    values.push_back(it != counters_.end() && it->second.expires > now ? it->second.value : 0);
  }
  return values;
}

Status MemoryCounterStore::add(std::span<const Increment> increments, Nanos now) {
  for (const Increment& inc : increments) {
    Counter& c = counters_[inc.key];
    if (c.expires <= now) c.value = 0;
    c.value += inc.amount;
    c.expires = now + inc.ttl;
  }
  sweep(now);
  return {};
}

void MemoryCounterStore::sweep(Nanos now) {
  if (now < next_sweep_) return;
  next_sweep_ = now + 10 * kSecond;
  std::erase_if(counters_, [&](const auto& kv) { return kv.second.expires <= now; });
}

}  // namespace kvgate::limit
