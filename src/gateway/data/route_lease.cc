#include "gateway/data/route_lease.h"

namespace kvgate::gateway {

void RouteLease::first_token() {
  if (!pool_ || first_token_sent_) return;
  first_token_sent_ = true;
  if (pool_alive()) pool_->first_token(id_);
}

void RouteLease::finish(bool ok, uint32_t output_tokens) {
  if (!pool_) return;
  PoolRouting* pool = pool_;
  pool_ = nullptr;
  if (pool_alive()) pool->finished(id_, ok, output_tokens);
}

void RouteLease::done(route::EndpointId endpoint, bool ok, Nanos now, bool first_token,
                      uint32_t output_tokens) {
  if (!pool_) return;
  PoolRouting* pool = pool_;
  pool_ = nullptr;
  if (pool_alive()) {
    pool->exchange_done(id_, endpoint, ok, now, first_token && !first_token_sent_, output_tokens);
  }
}

void RouteLease::moved(route::EndpointId to) {
  if (pool_ && pool_alive()) pool_->moved(id_, to);
}

void RouteLease::release_as_failed() { finish(false); }

}  // namespace kvgate::gateway
