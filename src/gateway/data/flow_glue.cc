#include "gateway/data/flow_glue.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/common/drain.h"
#include "io/clock_timer.h"
#include "openai/error.h"

namespace kvgate::gateway {

io::HttpResponse shutting_down_response() {
  io::HttpResponse r;
  r.status = 503;
  r.content_type = "application/json";
  r.body = openai::error_json(503, "The gateway is shutting down", {}, "shutting_down");
  r.headers.push_back({"x-kvgate-reject-reason", "shutting_down"});
  r.headers.push_back({"Retry-After", "1"});
  return r;
}

io::HttpResponse flow_refusal_response(const Pick& pick, const route::FlowQueueConfig& config) {
  const std::string reason(pick.flow_reason);
  if (reason == "shutting_down") return shutting_down_response();
  std::string message;
  if (reason == "queue_full") {
    message = "The pool is saturated and its queue is full";
  } else if (reason == "queue_timeout") {
    message =
        fmt::format("No capacity in time: waited {:.1f} s in the queue", to_seconds(pick.queued));
  } else if (reason == "deadline_unmeetable") {
    message = "The request's deadline cannot be met";
  } else {
    message = "Request not routed: " + reason;
  }
  io::HttpResponse r;
  r.status = pick.flow_status;
  r.content_type = "application/json";
  r.body = openai::error_json(pick.flow_status, message, {}, reason);
  r.headers.push_back({"x-kvgate-reject-reason", reason});
  if (reason == "queue_full" || reason == "queue_timeout") {
    Nanos wait = 0;
    for (Nanos w : config.max_wait) {
      if (w > 0) wait = wait == 0 ? w : std::min(wait, w);
    }
    const int64_t seconds = std::clamp<int64_t>(wait / kSecond, 1, 60);
    r.headers.push_back({"Retry-After", std::to_string(seconds)});
  }
  return r;
}

std::shared_ptr<void> refuse_queued_before(boost::asio::io_context& io, const Clock& clock,
                                           std::chrono::milliseconds grace,
                                           std::vector<PoolRuntime*> pools) {
  bool any = false;
  for (PoolRuntime* p : pools) any = any || p->flow() != nullptr;
  if (!any) return nullptr;
  const Nanos at = drain_plan(std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count())
                       .refuse_queued_at;
  auto timer = std::make_shared<io::ClockTimer>(io.get_executor(), clock);
  timer->expires_after(at);
  timer->async_wait([pools](const boost::system::error_code& ec) {
    if (ec) return;
    for (PoolRuntime* p : pools) p->refuse_queued();
  });
  return timer;
}

}  // namespace kvgate::gateway
