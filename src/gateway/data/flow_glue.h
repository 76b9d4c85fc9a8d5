// The gateway's side of flow control beyond the pool (pool_flow.h): the error a refused
// request gets, and the drain's deadline for requests still queued.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "core/common/clock.h"
#include "core/route/flow_queue.h"
#include "gateway/data/pool_runtime.h"
#include "io/http_types.h"

namespace kvgate::gateway {

// The answer of a request the gateway gives up on because it is stopping: 503, an
// OpenAI-style body with code `shutting_down`, `x-kvgate-reject-reason: shutting_down`
// and `Retry-After: 1` (another replica, or this one restarted, may serve it). Given to
// requests that arrive while draining, to those still queued near the end of the drain,
// and by the listeners (io::HttpServerOptions::drain_answer) to every request whose
// response has not begun shortly before the drain ends (core/common/drain.h).
io::HttpResponse shutting_down_response();

// An OpenAI-style error for a request refused by flow control (Pick::flow_status set):
// status 429 (queue_full, deadline_unmeetable) or 503 (queue_timeout, shutting_down),
// code = reason, `x-kvgate-reject-reason: <reason>`, and Retry-After (seconds) where
// waiting helps: queue_full and queue_timeout, a second past the shortest max wait
// (shutting_down: shutting_down_response()).
io::HttpResponse flow_refusal_response(const Pick& pick, const route::FlowQueueConfig& config);

// During a drain, queued requests may still be served; those still queued at the plan's
// refuse_queued_at (core/common/drain.h: 1 s before `grace` ends, or half the grace if
// shorter) are answered 503 shutting_down, and so is any request that would queue after
// that (PoolFlow::refuse_all). The timer runs on `clock` (the gateway's, io::ClockTimer)
// and lives as long as the result.
std::shared_ptr<void> refuse_queued_before(boost::asio::io_context& io, const Clock& clock,
                                           std::chrono::milliseconds grace,
                                           std::vector<PoolRuntime*> pools);

}  // namespace kvgate::gateway
