// Early rejection in a closed loop: a small deterministic world with eight prefill
// endpoints and one decode endpoint, overloaded three times over, run with the router's
// prediction and with the naive rule (judge by the decode load now). The world behaves
// exactly as the router predicts (each prefill endpoint serial at 16000 tokens/s, 1 ms
// per output token), so the comparison isolates the admission rule.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "core/route/router.h"

namespace kvgate::route {
namespace {

constexpr int kCapacityBlocks = 550;  // the decode endpoint's KV cache

struct Outcome {
  int admitted = 0;
  int rejected_at_door = 0;
  int wasted = 0;  // prefill done, then no room on decode: its work is lost
  int completed = 0;
  double busy_blocks = 0;  // time-average of decode blocks in use after warm-up
};

Outcome run_loop(bool predict) {
  RouterConfig c;
  c.block_size = 16;
  c.filters = {};
  c.overlap_source = OverlapSource::kNone;
  c.policy = {"least-request", {}};
  c.prefill_tokens_per_second = 16000;
  c.pd.mode = PdMode::kOn;
  c.early_reject = {
      .enabled = true, .max_usage = 1.0, .decode_seconds_per_token = 0.001, .predict = predict};
  auto router = Router::create(c, {});
  EXPECT_TRUE(router.ok());
  Router& r = **router;
  // A request: 1600 prompt tokens (100 ms of prefill), 160 output tokens (160 ms of
  // decode), 110 blocks. The decode endpoint fits 5: ~31 requests/s; 100 arrive per s,
  // so about ten requests are in prefill at any time.
  constexpr Nanos kPrefill = 100 * kMillisecond;
  constexpr Nanos kDecode = 160 * kMillisecond;
  constexpr int kBlocks = 110;
  constexpr int kCapacity = kCapacityBlocks;  // 5 requests
  constexpr int kPrefillEndpoints = 8;
  for (int i = 0; i < kPrefillEndpoints; ++i) {
    EXPECT_TRUE(r.add_endpoint({.url = fmt::format("p{}", i), .role = Role::kPrefill}, 0).ok());
  }
  EXPECT_TRUE(
      r.add_endpoint({.url = "d", .role = Role::kDecode, .kv_capacity_blocks = kCapacity}, 0).ok());
  enum Kind { kFinish = 0, kPrefillDone = 1, kArrival = 2 };  // order at equal times
  std::multimap<std::pair<Nanos, int>, RequestId> events;
  for (RequestId id = 1; id <= 300; ++id) {
    events.insert({{static_cast<Nanos>(id) * 10 * kMillisecond, kArrival}, id});
  }
  Outcome out;
  Rng rng(1);
  std::vector<Nanos> prefill_free_at(kPrefillEndpoints, 0);
  int decoding_blocks = 0;
  Nanos last = 0;
  const Nanos warm_up = 500 * kMillisecond;
  Nanos end = 0;
  while (!events.empty()) {
    auto it = events.begin();
    const auto [when, kind] = it->first;
    const RequestId id = it->second;
    events.erase(it);
    if (when > warm_up)
      out.busy_blocks += decoding_blocks * to_seconds(when - std::max(last, warm_up));
    last = when;
    end = when;
    switch (kind) {
      case kArrival: {
        RouteRequest req{.id = id, .prompt_tokens = 1600, .expected_output_tokens = 160};
        Decision d = r.route(req, when, rng);
        if (!d.accepted()) {
          EXPECT_EQ(d.reason, RejectReason::kDecodeFull);
          ++out.rejected_at_door;
          break;
        }
        ++out.admitted;
        EXPECT_TRUE(d.prefill_endpoint.has_value());
        Nanos& free_at = prefill_free_at[d.prefill_endpoint.value_or(0)];
        free_at = std::max(free_at, when) + kPrefill;
        events.insert({{free_at, kPrefillDone}, id});
        break;
      }
      case kPrefillDone:
        if (decoding_blocks + kBlocks > kCapacity) {
          ++out.wasted;
          r.pool().on_failed(id, when);
        } else {
          decoding_blocks += kBlocks;
          r.pool().on_first_token(id, when);
          events.insert({{when + kDecode, kFinish}, id});
        }
        break;
      case kFinish:
        decoding_blocks -= kBlocks;
        ++out.completed;
        r.pool().on_finished(id, when);
        break;
    }
  }
  out.busy_blocks /= to_seconds(end - warm_up);
  return out;
}

TEST(EarlyRejectLoop, PredictionWastesNoPrefillAndKeepsDecodeFull) {
  const Outcome naive = run_loop(/*predict=*/false);
  const Outcome predicted = run_loop(/*predict=*/true);
  // The naive rule admits whenever decode has room now, ignoring the prefills already
  // on their way: some of them find decode full when they land, and their prefill is
  // wasted.
  EXPECT_GT(naive.wasted, 0);
  // The prediction counts them, and the decodes finishing by then: nothing is wasted,
  // and decode stays as busy (it admits while decodes drain, not after).
  EXPECT_EQ(predicted.wasted, 0);
  EXPECT_GE(predicted.completed, naive.completed);
  EXPECT_GE(predicted.busy_blocks, naive.busy_blocks - 1e-9);
  EXPECT_GT(predicted.busy_blocks, 0.9 * kCapacityBlocks);  // decode kept (nearly) full
  std::printf("naive: admitted %d wasted %d completed %d busy %.1f blocks\n", naive.admitted,
              naive.wasted, naive.completed, naive.busy_blocks);
  std::printf("predicted: admitted %d wasted %d completed %d busy %.1f blocks\n",
              predicted.admitted, predicted.wasted, predicted.completed, predicted.busy_blocks);
}

}  // namespace
}  // namespace kvgate::route
