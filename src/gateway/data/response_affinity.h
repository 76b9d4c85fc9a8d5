// ResponseAffinity: which endpoint answered a Responses API response, for the requests
// that continue it (`previous_response_id`). That engine stored the conversation (vLLM
// with its response store enabled, `kvgate engine` always) and holds its KV, so a
// follow-up routed there finds both; another engine would answer 404.
//
// Per pool (endpoint ids are the pool's), bounded: past `capacity` ids the oldest goes.
// Per gateway process: replicas of a cluster do not share it (docs/gateway.md).
// Thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/route/endpoint.h"

namespace kvgate::gateway {

class ResponseAffinity {
 public:
  explicit ResponseAffinity(size_t capacity = 65536) : capacity_(capacity) {}

  void remember(std::string id, route::EndpointId endpoint) {
    if (id.empty()) return;
    std::lock_guard lock(mu_);
    auto [it, added] = by_id_.insert_or_assign(id, endpoint);
    if (!added) return;
    order_.push_back(std::move(id));
    if (order_.size() > capacity_) {
      by_id_.erase(order_.front());
      order_.pop_front();
    }
  }

  std::optional<route::EndpointId> find(std::string_view id) const {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(std::string(id));
    if (it == by_id_.end()) return std::nullopt;
    return it->second;
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return by_id_.size();
  }

 private:
  mutable std::mutex mu_;
  const size_t capacity_;
  std::unordered_map<std::string, route::EndpointId> by_id_;
  std::deque<std::string> order_;  // insertion order, for eviction
};

}  // namespace kvgate::gateway
