// PoolRouting's flow-control side (pool_flow.h): admission through the pool's queue.
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "gateway/data/pool_flow.h"
#include "gateway/data/pool_routing.h"

namespace kvgate::gateway {

namespace asio = boost::asio;

void PoolRouting::pump_flow(Nanos now) {
  if (flow_) flow_->pump(now);
}

size_t PoolRouting::flow_queued() const { return flow_ ? flow_->queued() : 0; }

asio::awaitable<Pick> PoolRouting::admit(const route::RouteRequest& request, FlowTicket ticket) {
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(Pick)>(
      [this, &request, ticket](auto handler) {
        asio::dispatch(strand_, [this, &request, ticket, h = std::move(handler)]() mutable {
          // Deliver may run now (routed at once) or later from pump(): the handler is
          // shared so that the callback stays copyable.
          using H = decltype(h);
          auto held = std::make_shared<H>(std::move(h));
          const Nanos now = clock_.now();
          close_expired_breakers(now);
          flow_->admit(request, ticket, now,
                       [this, held, &request](const route::FlowOutcome& o, PoolFlow::End end) {
                         Pick pick;
                         pick.decision = o.decision;
                         pick.queued = o.waited;
                         pick.charged_output_tokens = o.charged_output_tokens;
                         if (end == PoolFlow::End::kStopping) {
                           pick.flow_status = 503;
                           pick.flow_reason = "shutting_down";
                         } else if (end == PoolFlow::End::kClientGone) {
                           pick.flow_status = 499;  // nobody reads it: the client is gone
                           pick.flow_reason = "client_gone";
                         } else if (o.refusal != route::FlowRefusal::kNone) {
                           pick.flow_status = route::http_status(o.refusal);
                           pick.flow_reason = route::to_string(o.refusal);
                         }
                         if (o.kind == route::FlowOutcome::Kind::kDispatched) {
                           count_decision(pick.decision.reason);
                           if (pick.decision.session != route::SessionOutcome::kNone) {
                             count_session(pick.decision);
                           }
                         }
                         if (o.kind == route::FlowOutcome::Kind::kDispatched &&
                             pick.decision.endpoint < endpoints_.size()) {
                           // endpoints_ is written only on the strand, where this runs.
                           pick.endpoint = endpoints_[pick.decision.endpoint];
                           // Replica sync (replica_sync.h): peers hear of it as of a pick.
                           // `request` lives in the awaiting coroutine's frame.
                           if (hooks_.routed && pick.decision.accepted()) {
                             hooks_.routed(*router_, request, pick.decision, clock_.now());
                           }
                         }
                         auto ex = asio::get_associated_executor(*held);
                         asio::dispatch(ex, [held, pick = std::move(pick)]() mutable {
                           std::move (*held)(std::move(pick));
                         });
                       });
        });
      },
      asio::use_awaitable);
}

void PoolRouting::cancel_queued(route::RequestId id) {
  if (!flow_) return;
  asio::dispatch(strand_, [this, id] { flow_->cancel(id); });
}

void PoolRouting::flow_output(std::string_view tenant, uint32_t charged, uint32_t actual) {
  if (!flow_) return;
  asio::dispatch(strand_, [this, tenant = std::string(tenant), charged, actual] {
    flow_->finished(tenant, charged, actual);
  });
}

void PoolRouting::refuse_queued() {
  if (!flow_) return;
  asio::dispatch(strand_, [this] { flow_->refuse_all(clock_.now()); });
}

}  // namespace kvgate::gateway
