#include "core/limit/auth_failure_limiter.h"

#include <iterator>

namespace kvgate::limit {
namespace {

// Clients not tracked once the table is full are counted here (no address is empty).
const std::string kOverflow;

}  // namespace

std::optional<Nanos> AuthFailureLimiter::locked_out(std::string_view client, Nanos now) const {
  auto it = clients_.find(std::string(client));
  if (it == clients_.end() && clients_.size() >= options_.max_clients)
    it = clients_.find(kOverflow);
  if (it == clients_.end()) return std::nullopt;
  const Count& c = it->second;
  const Nanos end = c.window_start + options_.window;
  if (c.failures < options_.max_failures || now >= end) return std::nullopt;
  return end - now;
}

const std::string& AuthFailureLimiter::key_of(std::string_view client, Nanos now) {
  scratch_.assign(client);
  if (clients_.size() < options_.max_clients || clients_.count(scratch_) > 0) return scratch_;
  // Full: forget the clients whose window is over, then count a newcomer as overflow.
  for (auto it = clients_.begin(); it != clients_.end();) {
    it = now >= it->second.window_start + options_.window ? clients_.erase(it) : std::next(it);
  }
  return clients_.size() < options_.max_clients ? scratch_ : kOverflow;
}

bool AuthFailureLimiter::failed(std::string_view client, Nanos now) {
  Count& c = clients_[key_of(client, now)];
  if (c.failures == 0 || now >= c.window_start + options_.window) c = Count{now, 0};
  ++c.failures;
  return c.failures == options_.max_failures;
}

}  // namespace kvgate::limit
