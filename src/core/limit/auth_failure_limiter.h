// AuthFailureLimiter: bounds how fast one client may guess a secret (the admin token).
//
// Each client (its address, without the port) may fail `max_failures` times in a
// `window`; once it has, every request of it is refused, unchecked, until that window
// ends. Refused requests are not checked at all, so a correct guess made while locked
// out is not told apart from a wrong one: at most max_failures guesses per window.
// Success does not reset the count (a client that knows the token rarely fails).
// At most `max_clients` clients are tracked; past that, the clients not yet tracked
// share one count (a flood from many addresses locks out new addresses, not the known
// ones). Time is passed in.
//
//   AuthFailureLimiter limiter({.max_failures = 10, .window = 60 * kSecond});
//   if (auto wait = limiter.locked_out(ip, now)) return too_many(*wait);
//   if (!token_ok) limiter.failed(ip, now);
//
// Not thread-safe: the caller locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/common/time.h"

namespace kvgate::limit {

class AuthFailureLimiter {
 public:
  struct Options {
    uint32_t max_failures = 10;
    Nanos window = 60 * kSecond;
    size_t max_clients = 4096;
  };

  explicit AuthFailureLimiter(Options options) : options_(options) {}

  // How long `client` stays locked out, or nullopt when it may try now.
  std::optional<Nanos> locked_out(std::string_view client, Nanos now) const;
  // Records a failed authentication. Returns true when this failure locks the client out.
  bool failed(std::string_view client, Nanos now);

  size_t tracked() const { return clients_.size(); }

 private:
  struct Count {
    Nanos window_start = 0;
    uint32_t failures = 0;
  };
  // The key `client` is counted under (the shared overflow key when the table is full).
  const std::string& key_of(std::string_view client, Nanos now);

  Options options_;
  std::unordered_map<std::string, Count> clients_;
  std::string scratch_;
};

}  // namespace kvgate::limit
