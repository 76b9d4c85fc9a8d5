// FaultMetrics: what the gateway counts about requests cut short — by their client
// (cancellation) or by their engine (stream migration, gateway/data/stream_migration.h) —
// declared here in one place and rendered after GatewayMetrics on /metrics.
//
//   kvgate_client_cancellations_total{pool,phase}       counter: clients that left before
//                                                       their answer ended; phase
//                                                       "before_first_byte" or
//                                                       "after_first_byte" (mid-stream)
//   kvgate_stream_migrations_total{pool,outcome}        counter: streams whose engine failed
//                                                       mid-stream, by outcome "resumed"
//                                                       (spliced onto another endpoint),
//                                                       "failed" (no endpoint took it) or
//                                                       "exhausted" (max_migrations reached)
//   kvgate_stream_migrated_tokens_total{pool}           counter: tokens already streamed that
//                                                       a migration sent on as prompt
//
// Thread-safe (one mutex; these are rare events, never on the common path).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace kvgate::gateway {

class FaultMetrics {
 public:
  void cancelled(std::string_view pool, bool after_first_byte);
  // outcome: "resumed", "failed" or "exhausted".
  void migration(std::string_view pool, std::string_view outcome, uint64_t carried_tokens);
  // Families with no sample yet are still declared (their help says what they mean).
  std::string render() const;

 private:
  using Key2 = std::pair<std::string, std::string>;
  mutable std::mutex mu_;
  std::map<Key2, uint64_t> cancellations_;
  std::map<Key2, uint64_t> migrations_;
  std::map<std::string, uint64_t> migrated_tokens_;
};

}  // namespace kvgate::gateway
