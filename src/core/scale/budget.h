// GPU budget: several pools (prefill and decode of one model, or several models) share a
// fixed number of GPUs; each pool's replica needs gpus_per_replica of them.
//
// When the pools ask for more than the budget, fit_gpu_budget shares it in proportion to
// what each asked for: every pool first gets floor(asked x budget / total asked) replicas
// (never below its min), then the GPUs left over go one replica at a time to the pool
// furthest from what it asked, relative to its ask (ties: lower index). Min replicas
// are honoured even when they alone exceed the budget (`over_budget` then says so).
//
//   std::vector<PoolAsk> asks = {{.desired = 6, .min_replicas = 1, .gpus_per_replica = 1},
//                                {.desired = 4, .min_replicas = 1, .gpus_per_replica = 2}};
//   BudgetFit fit = fit_gpu_budget(asks, /*gpus=*/10);  // fit.replicas == {4, 3}
//
// Pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvgate::scale {

struct PoolAsk {
  int32_t desired = 0;
  int32_t min_replicas = 0;
  int32_t gpus_per_replica = 1;
};

struct BudgetFit {
  std::vector<int32_t> replicas;  // per pool, same order as the asks
  int64_t gpus_used = 0;
  bool trimmed = false;      // some pool got less than it asked
  bool over_budget = false;  // min replicas alone exceed the budget
};

// REQUIRES: gpus_per_replica >= 1, desired >= 0, min_replicas >= 0.
BudgetFit fit_gpu_budget(std::span<const PoolAsk> asks, int64_t total_gpus);

}  // namespace kvgate::scale
