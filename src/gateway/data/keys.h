// API keys: who a request belongs to.
//
// A keys file (YAML) lists, per key, the SHA-256 of the key (never the key itself) and
// the tenant it belongs to, with the models that tenant may use, its limits and its
// default priority:
//
//   keys:
//     - sha256: 3f9a...e1          # hex, 64 digits
//       tenant: acme
//       models: [qwen3]            # absent or empty: every model
//       priority: 0                # default priority (> 0 critical, < 0 sheddable)
//       may_set_priority: false    # may the x-kvgate-priority header override it
//       weight: 1                  # flow control: fair share when the pool is saturated
//       deadline_ms: 0             # flow control: default dispatch deadline (0: none)
//       ttft_ms: 0                 # latency targets: default TTFT target (0: none)
//       tpot_ms: 0                 # latency targets: default time per output token
//       limits:
//         tokens_per_minute: 100000
//         requests_per_minute: 600
//         prompt_weight: 1              # tokens counted = 1 x prompt + 1 x completion
//         completion_weight: 1
//         models:                       # per model, on top of the tenant-wide budget
//           qwen3: {tokens_per_minute: 20000, requests_per_minute: 100}
//
// A request presents `Authorization: Bearer <key>`; KeyStore::authenticate hashes it and
// compares the digest with every entry in constant time (CRYPTO_memcmp, no early exit),
// so neither the key nor which entry matched leaks through timing. Keys never appear in
// logs or errors. `kvgate keys add` (add_keys_command) makes a key with RAND_bytes,
// prints it once and appends only its hash.
//
// Immutable after load; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace CLI {
class App;
}

namespace kvgate::gateway {

using KeyDigest = std::array<uint8_t, 32>;

// Budgets for one model only (counted apart from the tenant-wide ones).
struct ModelLimits {
  std::string model;  // as named in the gateway config's models[].name
  uint64_t tokens_per_minute = 0;
  uint64_t requests_per_minute = 0;
};

struct TenantLimits {
  uint64_t tokens_per_minute = 0;  // 0: unlimited
  uint64_t requests_per_minute = 0;
  // tokens = prompt_weight x prompt + completion_weight x completion (1 and 1: the total;
  // 0 and 1: completion tokens only).
  double prompt_weight = 1.0;
  double completion_weight = 1.0;
  std::vector<ModelLimits> models;
};

struct Tenant {
  std::string name;
  std::vector<std::string> models;  // empty: every model
  int priority = 0;
  bool may_set_priority = false;
  TenantLimits limits;
  // Flow control (docs/flow-control.md): the tenant's fair share of a saturated pool,
  // and the dispatch deadline of its requests that send no x-kvgate-deadline-ms (0: none).
  double weight = 1;
  int64_t deadline_ms = 0;
  // Latency targets (docs/router.md, "Latency targets") of its requests that send no
  // x-kvgate-ttft-ms / x-kvgate-tpot-ms (nor llm-d's x-slo-*), in ms; 0: none.
  int64_t ttft_ms = 0;
  int64_t tpot_ms = 0;

  bool allows(std::string_view model) const;
};

class KeyStore {
 public:
  static Result<KeyStore> parse(std::string_view yaml, std::string_view file);
  static Result<KeyStore> load(const std::string& file);

  // The tenant of `key`, or nullptr.
  const Tenant* authenticate(std::string_view key) const;
  // The tenant of an Authorization header value ("Bearer <key>"), or nullptr.
  const Tenant* authenticate_header(std::string_view authorization) const;
  size_t size() const { return entries_.size(); }
  // Every tenant once (the first key's, when several keys name it), in file order.
  std::vector<const Tenant*> tenants() const;

 private:
  struct Entry {
    KeyDigest digest;
    Tenant tenant;
  };
  std::vector<Entry> entries_;
};

KeyDigest sha256(std::string_view data);
std::string to_hex(const KeyDigest& digest);
// A new random key, "kvg-" followed by 48 hex digits (24 bytes from RAND_bytes).
Result<std::string> generate_key();

// `kvgate keys add --tenant NAME [--models M ...] [--priority N] --file KEYS`.
void add_keys_command(CLI::App& app);

}  // namespace kvgate::gateway
