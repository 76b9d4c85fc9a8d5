// Routing decision latency: one full decision (match the prompt's 450 block keys in a
// populated index, the active-block walk, effective load, filters, cost over 64
// endpoints, pick), measured one decision at a time so that percentiles can be
// reported (p50_ns, p99_ns counters; the default "Time" column is the mean).
//
// Every case reads the precise index (with_policy sets overlap_source: precise; the
// router's default is approx, and the fleet's approximate index is empty, so without it a
// "full decision" would match nothing), except BothIndexes (precise and the empty approx
// index) and the policies that use no overlap (load, random).
//
// The fleet: 64 endpoints; 32 system prompts of 64 blocks, 1024 conversations of 450
// blocks (a system prompt + 386 blocks of their own), each conversation cached on 1-3
// endpoints, each system prompt on 16; 16 requests in flight per endpoint. Requests
// are drawn from the conversations (a cache hit on a few endpoints and the system
// prompt everywhere: every conversation carries one, so all 64 endpoints end up
// holding all of them), so the walk is as long as it gets: the whole prompt.
//
// Session affinity (the *Session* cases, issue #43): the same fleet and requests with
// session affinity on, each request carrying its conversation's session. "Bound": every
// conversation was routed once before (its session bound where kv-cost put it, within
// the load bound): the kept path, whose policy prices the one kept endpoint. "New": each
// request a session never seen: the lookup's miss, then the policy over all 64. Against
// BM_Decide_KvCost, the added cost of a decision with a session;
// BM_RouteLifecycle_KvCostSession adds the binding at commit. The state is
// BM_Decide_KvCost's: the routes that bind the sessions draw from their own Rng (the
// requests measured are the same sequence), every request they made has finished, and
// what they recorded in the approximate index is removed again.
//
// Data-parallel ranks (BM_Decide_KvCostDataParallel, issue #43): the same 64 endpoints,
// indexes, loads and requests as BM_Decide_KvCost, as 16 addresses x 4 ranks
// (core/route/data_parallel.h: URL#dpN), a rank's zone and rack its address's; only the
// URLs differ. Ranks are endpoints to the router: nothing in decide() reads a URL (the
// rank is split from it when the gateway sends the request), so the two cases score the
// same 64 candidates the same way and should take the same time. They run next to each
// other so that both fleets are built on a heap in the same state (an earlier run had
// the ranks' case 8th, after six other fleets were built and freed).
//
//   build/release/route_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/kv/approx_index.h"
#include "core/kv/precise_index.h"
#include "core/route/data_parallel.h"
#include "core/route/router.h"

namespace kvgate::route {
namespace {

constexpr uint32_t kBs = 16;
constexpr int kEndpoints = 64;
constexpr int kSystemPrompts = 32;
constexpr int kSystemBlocks = 64;
constexpr int kConversations = 1024;
constexpr int kPromptBlocks = 450;
constexpr int kInFlightPerEndpoint = 16;

struct Fleet {
  kv::PreciseIndex precise{{.model = "m", .block_size = kBs}};
  kv::ApproxIndex approx{{}};
  std::unique_ptr<Router> router;
  std::vector<std::vector<kv::TokenId>> tokens;  // per conversation
  std::vector<std::vector<kv::BlockKey>> keys;   // per conversation
  Rng rng{42};

  // Session affinity: whether the requests carry their conversation's session, bound
  // beforehand (kBound) or never seen (kNew).
  enum class Sessions { kNone, kBound, kNew };

  explicit Fleet(RouterConfig config, bool pd = false, bool shared_system_prompts = true,
                 bool data_parallel = false) {
    config.block_size = kBs;
    auto r = Router::create(config, {.precise = &precise, .approx = &approx});
    if (!r) std::abort();
    router = std::move(*r);
    for (int e = 0; e < kEndpoints; ++e) {
      EndpointSpec spec{.url = fmt::format("http://10.0.0.{}:8000", e),
                        .zone = fmt::format("z{}", e / 16),
                        .rack = fmt::format("r{}", e / 4),
                        .kv_capacity_blocks = 200'000};
      // 16 engines of 4 ranks: endpoint e is rank e % 4 of address e / 4.
      if (data_parallel) {
        spec.url =
            dp_rank_url(fmt::format("http://10.0.0.{}:8000", e / 4), static_cast<uint32_t>(e % 4));
      }
      if (pd) spec.role = e < kEndpoints / 4 ? Role::kPrefill : Role::kDecode;
      auto id = router->add_endpoint(spec, 0);
      if (!id) std::abort();
      router->pool().on_metrics(
          *id,
          {.waiting = static_cast<uint32_t>(e % 3), .running = 20, .kv_usage = 0.3 + 0.005 * e}, 0);
    }
    // Prompts: system prompt tokens then the conversation's own.
    for (int c = 0; c < kConversations; ++c) {
      std::vector<kv::TokenId> t(kPromptBlocks * kBs);
      const int sys = c % kSystemPrompts;
      for (size_t i = 0; i < t.size(); ++i) {
        const bool system = shared_system_prompts && i < kSystemBlocks * kBs;
        t[i] = system ? static_cast<kv::TokenId>(sys * 1'000'000 + i)
                      : static_cast<kv::TokenId>(100'000'000 + c * 10'000 + i);
      }
      std::vector<kv::BlockKey> k;
      kv::hash_blocks(t, kBs, kv::block_seed("m", "", ""), k);
      tokens.push_back(std::move(t));
      keys.push_back(std::move(k));
    }
    // Cache contents through the real event path.
    uint64_t engine_hash = 1;
    auto store = [&](int ep, int conv, int blocks) {
      std::vector<uint64_t> h(blocks);
      std::iota(h.begin(), h.end(), engine_hash);
      engine_hash += blocks;
      kv::BlockStoredEvent ev;
      ev.block_hashes = h;
      ev.token_ids = std::span(tokens[conv]).first(blocks * kBs);
      ev.block_size = kBs;
      precise.apply_stored(static_cast<kv::EndpointId>(ep), ev);
    };
    for (int s = 0; s < kSystemPrompts && shared_system_prompts; ++s) {
      for (int i = 0; i < 16; ++i) store(static_cast<int>(rng.below(kEndpoints)), s, kSystemBlocks);
    }
    for (int c = 0; c < kConversations; ++c) {
      const int copies = 1 + static_cast<int>(rng.below(3));
      for (int i = 0; i < copies; ++i) {
        store(static_cast<int>(rng.below(kEndpoints)), c, kPromptBlocks);
      }
    }
    // Requests in flight.
    RequestId id = 1'000'000;
    for (int e = 0; e < kEndpoints; ++e) {
      for (int i = 0; i < kInFlightPerEndpoint; ++i) {
        const int conv = static_cast<int>(rng.below(kConversations));
        if (!router->pool()
                 .on_routed(id++,
                            {.endpoint = static_cast<EndpointId>(e),
                             .keys = keys[conv],
                             .prompt_tokens = kPromptBlocks * kBs,
                             .expected_output_tokens = 256,
                             .prefill_tokens = 1000},
                            0)
                 .ok()) {
          std::abort();
        }
      }
    }
    // Session affinity: every conversation routed once, its session bound where the
    // policy put it; the request ends at once (the load above stays as it was). Its own
    // Rng, and the approximate index emptied again after: the state the measured
    // requests meet is that of the fleet without sessions, plus the bindings.
    if (router->sessions()) {
      Rng setup_rng{7};
      for (int c = 0; c < kConversations; ++c) {
        RouteRequest r{.id = id++,
                       .keys = keys[c],
                       .prompt_tokens = kPromptBlocks * kBs,
                       .expected_output_tokens = 256};
        r.session = session_key(static_cast<uint64_t>(c) + 1);
        if (!router->route(r, 0, setup_rng).accepted()) std::abort();
        if (!router->pool().on_first_token(r.id, 0) || !router->pool().on_finished(r.id, 0)) {
          std::abort();
        }
      }
      for (int e = 0; e < kEndpoints; ++e) approx.remove_endpoint(static_cast<kv::EndpointId>(e));
    }
  }

  RouteRequest request(RequestId id, Sessions sessions = Sessions::kNone) {
    const int conv = static_cast<int>(rng.below(kConversations));
    RouteRequest r{.id = id,
                   .keys = keys[conv],
                   .prompt_tokens = kPromptBlocks * kBs,
                   .expected_output_tokens = 256};
    if (sessions == Sessions::kBound) r.session = session_key(static_cast<uint64_t>(conv) + 1);
    if (sessions == Sessions::kNew) r.session = session_key((uint64_t{1} << 40) + id);
    return r;
  }
};

void report(benchmark::State& state, std::vector<double>& ns) {
  std::sort(ns.begin(), ns.end());
  auto pct = [&](double p) { return ns[static_cast<size_t>(p * (ns.size() - 1))]; };
  state.counters["p50_ns"] = pct(0.50);
  state.counters["p99_ns"] = pct(0.99);
  state.counters["max_ns"] = ns.back();
}

// decide() only: the routing decision as the gateway's strand spends it.
void run_decide(benchmark::State& state, RouterConfig config, bool pd = false,
                bool shared_system_prompts = true,
                Fleet::Sessions sessions = Fleet::Sessions::kNone, bool data_parallel = false) {
  Fleet fleet(std::move(config), pd, shared_system_prompts, data_parallel);
  std::vector<double> ns;
  ns.reserve(1 << 20);
  RequestId id = 1;
  Nanos now = kMillisecond;
  for (auto _ : state) {
    RouteRequest r = fleet.request(id++, sessions);
    auto t0 = std::chrono::steady_clock::now();
    Decision d = fleet.router->decide(r, now, fleet.rng);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(d);
    const double elapsed = std::chrono::duration<double, std::nano>(t1 - t0).count();
    ns.push_back(elapsed);
    state.SetIterationTime(elapsed * 1e-9);
  }
  report(state, ns);
}

// The fleet's cache contents are in the precise index: every case reads it (see the top).
RouterConfig with_policy(PolicyConfig policy) {
  RouterConfig c;
  c.policy = std::move(policy);
  c.overlap_source = OverlapSource::kPrecise;
  return c;
}

void BM_Decide_KvCost(benchmark::State& state) {
  run_decide(state, with_policy({"kv-cost", {{"overlap_weight", "1"}}}));
}
// The same without shared system prompts: each prompt is held by 1-3 endpoints only,
// which shows how much of the decision is the index walking widely shared blocks.
void BM_Decide_KvCostNoSharedPrefix(benchmark::State& state) {
  run_decide(state, with_policy({"kv-cost", {}}), false, /*shared_system_prompts=*/false);
}
void BM_Decide_KvCostSoftmax(benchmark::State& state) {
  run_decide(state, with_policy({"kv-cost", {{"temperature", "0.5"}}}));
}
void BM_Decide_KvCostBothIndexes(benchmark::State& state) {
  RouterConfig c = with_policy({"kv-cost", {}});
  c.overlap_source = OverlapSource::kBoth;
  run_decide(state, c);
}
void BM_Decide_Scorers(benchmark::State& state) { run_decide(state, with_policy({"scorers", {}})); }
void BM_Decide_Load(benchmark::State& state) { run_decide(state, with_policy({"load", {}})); }
void BM_Decide_Random(benchmark::State& state) { run_decide(state, with_policy({"random", {}})); }
// Session affinity on (defaults: capacity 100,000, idle_ttl 30 min), kv-cost as in
// BM_Decide_KvCost.
RouterConfig with_sessions() {
  RouterConfig c = with_policy({"kv-cost", {{"overlap_weight", "1"}}});
  c.session_affinity.enabled = true;
  return c;
}
void BM_Decide_KvCostSessionBound(benchmark::State& state) {
  run_decide(state, with_sessions(), false, true, Fleet::Sessions::kBound);
}
void BM_Decide_KvCostSessionNew(benchmark::State& state) {
  run_decide(state, with_sessions(), false, true, Fleet::Sessions::kNew);
}
// BM_Decide_KvCost over 16 addresses x 4 data-parallel ranks: the same 64 candidates.
void BM_Decide_KvCostDataParallel(benchmark::State& state) {
  run_decide(state, with_policy({"kv-cost", {{"overlap_weight", "1"}}}), false, true,
             Fleet::Sessions::kNone, /*data_parallel=*/true);
}
void BM_Decide_PdEarlyReject(benchmark::State& state) {
  RouterConfig c = with_policy({"kv-cost", {}});
  c.early_reject.enabled = true;
  run_decide(state, c, /*pd=*/true);
}

// The two halves of BM_Decide_KvCost: the precise index's match alone, and the
// router's part alone (decide() with the overlap given, matched outside the timing).
void BM_MatchOnly_Precise(benchmark::State& state) {
  Fleet fleet(with_policy({"kv-cost", {}}));
  std::vector<double> ns;
  ns.reserve(1 << 20);
  std::vector<kv::EndpointMatch> out;
  RequestId id = 1;
  for (auto _ : state) {
    RouteRequest r = fleet.request(id++);
    out.clear();
    auto t0 = std::chrono::steady_clock::now();
    fleet.precise.match(r.keys, 0, out);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(out.data());
    const double elapsed = std::chrono::duration<double, std::nano>(t1 - t0).count();
    ns.push_back(elapsed);
    state.SetIterationTime(elapsed * 1e-9);
  }
  report(state, ns);
}

void BM_DecideGivenOverlap_KvCost(benchmark::State& state) {
  Fleet fleet(with_policy({"kv-cost", {}}));
  std::vector<double> ns;
  ns.reserve(1 << 20);
  std::vector<kv::EndpointMatch> overlap;
  RequestId id = 1;
  for (auto _ : state) {
    RouteRequest r = fleet.request(id++);
    overlap.clear();
    fleet.precise.match(r.keys, 0, overlap);
    auto t0 = std::chrono::steady_clock::now();
    Decision d = fleet.router->decide(r, overlap, kMillisecond, fleet.rng);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(d);
    const double elapsed = std::chrono::duration<double, std::nano>(t1 - t0).count();
    ns.push_back(elapsed);
    state.SetIterationTime(elapsed * 1e-9);
  }
  report(state, ns);
}

// The active-block walk alone (which leading blocks each endpoint's in-flight requests
// already hold).
void BM_ActivePrefixOnly(benchmark::State& state) {
  Fleet fleet(with_policy({"kv-cost", {}}));
  std::vector<double> ns;
  ns.reserve(1 << 20);
  std::vector<ActiveBlocks::Prefix> out;
  RequestId id = 1;
  for (auto _ : state) {
    RouteRequest r = fleet.request(id++);
    out.clear();
    auto t0 = std::chrono::steady_clock::now();
    fleet.router->pool().active_prefix(r.keys, out);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(out.data());
    const double elapsed = std::chrono::duration<double, std::nano>(t1 - t0).count();
    ns.push_back(elapsed);
    state.SetIterationTime(elapsed * 1e-9);
  }
  report(state, ns);
}

// The whole lifecycle on the strand: decide, commit (load tracking + approx index
// record), first token, finish.
void run_lifecycle(benchmark::State& state, const RouterConfig& c,
                   Fleet::Sessions sessions = Fleet::Sessions::kNone) {
  Fleet fleet(c);
  std::vector<double> ns;
  ns.reserve(1 << 20);
  RequestId id = 1;
  Nanos now = kMillisecond;
  for (auto _ : state) {
    RouteRequest r = fleet.request(id++, sessions);
    now += kMicrosecond;
    auto t0 = std::chrono::steady_clock::now();
    Decision d = fleet.router->route(r, now, fleet.rng);
    fleet.router->pool().on_first_token(r.id, now);
    fleet.router->pool().on_finished(r.id, now);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(d);
    const double elapsed = std::chrono::duration<double, std::nano>(t1 - t0).count();
    ns.push_back(elapsed);
    state.SetIterationTime(elapsed * 1e-9);
  }
  report(state, ns);
}
void BM_RouteLifecycle_KvCost(benchmark::State& state) {
  run_lifecycle(state, with_policy({"kv-cost", {}}));
}
// The same with bound sessions: the kept path, and commit refreshing the binding.
void BM_RouteLifecycle_KvCostSession(benchmark::State& state) {
  RouterConfig c = with_sessions();
  c.policy = {"kv-cost", {}};
  run_lifecycle(state, c, Fleet::Sessions::kBound);
}

BENCHMARK(BM_Decide_KvCost)->UseManualTime()->Iterations(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_KvCostDataParallel)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_KvCostNoSharedPrefix)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_KvCostSoftmax)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_KvCostBothIndexes)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_Scorers)->UseManualTime()->Iterations(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_Load)->UseManualTime()->Iterations(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_Random)->UseManualTime()->Iterations(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_KvCostSessionBound)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_KvCostSessionNew)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decide_PdEarlyReject)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatchOnly_Precise)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ActivePrefixOnly)->UseManualTime()->Iterations(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecideGivenOverlap_KvCost)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RouteLifecycle_KvCost)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RouteLifecycle_KvCostSession)
    ->UseManualTime()
    ->Iterations(100'000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvgate::route

BENCHMARK_MAIN();
