// GatewayPicker: the Exchange's Picker over the running gateway (gateway/data/external.h):
// `kvgate epp` routes with everything `kvgate serve` routes with.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "core/common/clock.h"
#include "epp/exchange.h"
#include "gateway/data/external.h"
#include "gateway/gateway.h"

namespace kvgate::epp {

class GatewayPicker final : public Picker {
 public:
  // Both borrowed: they must outlive the picker. `clock` is the gateway's.
  GatewayPicker(gateway::Gateway& gateway, const Clock& clock) : gateway_(gateway), clock_(clock) {}

  // The server's form (epp_server.cc): the front door runs on this thread, and so does the
  // router's decision when nothing comes before it that waits (no rate limits, LoRA
  // placement, engine token ids or flow-control queue) and the pool's strand is free;
  // `decided` then runs here, before this returns. Else the gateway decides on its I/O
  // threads and `decided` runs there. The cancel takes a queued request out of the queue
  // at once. Nothing waits.
  std::function<void()> start_pick(gateway::ExternalRequest request,
                                   std::function<void(gateway::ExternalPick)> decided) override {
    return gateway_.pick_external(std::move(request), std::move(decided));
  }
  // Blocks this thread until the gateway decides (for a caller that may wait; the server
  // does not). While waiting it looks every few milliseconds whether the data plane left,
  // and then cancels (a queued request leaves the queue at once).
  gateway::ExternalPick pick(gateway::ExternalRequest request,
                             const std::function<bool()>& cancelled) override {
    auto promise = std::make_shared<std::promise<gateway::ExternalPick>>();
    std::future<gateway::ExternalPick> decided = promise->get_future();
    std::function<void()> cancel =
        start_pick(std::move(request),
                   [promise](gateway::ExternalPick p) { promise->set_value(std::move(p)); });
    bool cancel_sent = false;
    while (decided.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
      if (!cancel_sent && cancelled && cancelled()) {
        cancel();
        cancel_sent = true;
      }
    }
    return decided.get();
  }
  void done(gateway::ExternalPick pick, gateway::ExternalOutcome outcome) override {
    gateway_.external_done(std::move(pick), std::move(outcome));
  }
  Nanos now() const override { return clock_.now(); }
  void served(gateway::ExternalPick& pick, const std::string& endpoint) override {
    gateway::external_served(pick, endpoint);
  }

 private:
  gateway::Gateway& gateway_;
  const Clock& clock_;
};

}  // namespace kvgate::epp
