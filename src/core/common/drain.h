// The drain's timeline: what a graceful stop (SIGTERM; docs/gateway.md "Graceful drain")
// gives up on, and when, counted from the start of its grace time. One rule for the
// gateway's queue (gateway/data/flow_glue.h) and its listeners (io::HttpServer::stop with
// HttpServerOptions::drain_answer), so that every request gets an answer:
//
//  - refuse_queued_at: requests still waiting in a flow-control queue are answered 503
//    `shutting_down` (1 s before the end, or half the grace if shorter). What the queue
//    dispatched before then may still be served.
//  - answer_unstarted_at: every request whose response has not begun (no status line
//    sent: queued, on its way to an engine, or waiting for the engine's first byte) is
//    answered 503 `shutting_down` and its upstream exchange cancelled (250 ms before the
//    end, or a quarter of the grace if shorter): the margin in which that small answer
//    is written.
//  - end: responses still streaming are cut (their connections closed).
//
//   const DrainPlan p = drain_plan(1500 * kMillisecond);  // 750 ms, 1250 ms, 1500 ms
//
// Pure; thread-safe.
#pragma once

#include "core/common/time.h"

namespace kvgate {

struct DrainPlan {
  Nanos refuse_queued_at = 0;
  Nanos answer_unstarted_at = 0;
  Nanos end = 0;
};

// refuse_queued_at <= answer_unstarted_at <= end; a negative grace counts as 0.
DrainPlan drain_plan(Nanos grace);

}  // namespace kvgate
