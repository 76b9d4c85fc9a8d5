// KV events decoded and applied per second through the subscriber (issue 7's target).
//
// Publishers (io::KvEventPublisher, vLLM's wire format: topic, 8-byte sequence, msgpack
// batch in the array form) send pre-encoded batches over tcp loopback as fast as the
// subscriber takes them; io::KvEventSubscriber receives, sequences and decodes them on its
// thread, and the batches are applied to a kv::PreciseIndex either in the sink on that
// same thread (`inline`) or, as `kvgate serve` does, posted to a strand on another thread
// (`strand`). The publisher keeps at most kWindow batches ahead of what was applied, so
// nothing is dropped at a high-water mark (a drop would be a gap, and the subscriber would
// clear the endpoint): the figure is the throughput of the receiving side.
//
// The stream is llm-d's shape of workload: 7,200-token prompts (450 blocks of 16 tokens)
// of which 6,000 tokens are one of 16 shared system prompts. Each endpoint stores every
// system prompt once (warm-up), then each batch stores one request's 75 question blocks
// (chunks of 32, as prefill steps would) and removes the question blocks of the request 64
// before it: 150 block events per batch, with token ids, as vLLM sends them.
//
// BM_DecodeApply is the same corpus decoded and applied in a loop without sockets, to
// show what the transport costs; BM_Decode decodes only.
//
// Counters: block_events_per_s is wall-clock (depends on what else the machine runs);
// block_events_per_cpu_s divides by the CPU time of the receiving threads (the
// subscriber's, plus the strand's in strand mode): what one dedicated core takes.
#include <benchmark/benchmark.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>

#include "core/common/rng.h"
#include "core/kv/block_hash.h"
#include "core/kv/event_apply.h"
#include "core/kv/precise_index.h"
#include "core/kv/vllm_event_codec.h"
#include "io/kv_event_publisher.h"
#include "io/kv_event_subscriber.h"

namespace kvgate::kv {
namespace {

constexpr uint32_t kBlockSize = 16;
constexpr size_t kPromptBlocks = 450;  // 7,200 tokens
constexpr size_t kSystemBlocks = 375;  // 6,000-token shared system prompt
constexpr size_t kChunkBlocks = 32;    // blocks per BlockStored event
constexpr size_t kGroups = 16;         // distinct system prompts
constexpr size_t kRequests = 256;      // distinct requests per endpoint (the corpus cycles)
constexpr size_t kLive = 64;           // requests whose question blocks stay cached
constexpr size_t kWindow = 1024;       // batches in flight at most (all endpoints)
constexpr size_t kBatchesPerIteration = 2048;

uint64_t engine_hash(EndpointId e, BlockKey own) { return own * 0x9E3779B97F4A7C15ULL + e; }

size_t count_block_events(const EventBatch& b) {
  size_t n = 0;
  for (const KvEvent& ev : b.events) {
    if (auto* s = std::get_if<BlockStored>(&ev)) n += s->block_hashes.size();
    if (auto* r = std::get_if<BlockRemoved>(&ev)) n += r->block_hashes.size();
  }
  return n;
}

// The encoded stream of one endpoint: warm-up batches (system prompts), then a cycle of
// steady-state batches.
struct Corpus {
  std::vector<std::string> warmup;
  std::vector<std::string> cycle;
  size_t block_events_per_batch = 0;

  explicit Corpus(EndpointId e) {
    Rng rng(7);  // the same prompts on every endpoint (hashes differ per endpoint)
    std::vector<std::vector<TokenId>> system(kGroups);
    for (auto& s : system) {
      s.resize(kSystemBlocks * kBlockSize);
      for (auto& t : s) t = static_cast<TokenId>(rng.below(150000));
    }
    const uint64_t seed = block_seed("bench", "", "");
    std::vector<std::vector<TokenId>> tokens(kRequests);
    std::vector<std::vector<uint64_t>> hashes(kRequests);
    for (size_t r = 0; r < kRequests; ++r) {
      tokens[r] = system[r % kGroups];
      tokens[r].resize(kPromptBlocks * kBlockSize);
      for (size_t i = kSystemBlocks * kBlockSize; i < tokens[r].size(); ++i) {
        tokens[r][i] = static_cast<TokenId>(rng.below(150000));
      }
      std::vector<BlockKey> keys;
      hash_blocks(tokens[r], kBlockSize, seed, keys);
      for (BlockKey k : keys) hashes[r].push_back(engine_hash(e, k));
    }
    auto stored = [&](size_t r, size_t from, size_t to, EventBatch& b) {
      for (size_t c = from; c < to; c += kChunkBlocks) {
        const size_t n = std::min(kChunkBlocks, to - c);
        BlockStored s;
        s.block_hashes.assign(hashes[r].begin() + c, hashes[r].begin() + c + n);
        if (c > 0) s.parent_block_hash = hashes[r][c - 1];
        s.token_ids.assign(tokens[r].begin() + c * kBlockSize,
                           tokens[r].begin() + (c + n) * kBlockSize);
        s.block_size = kBlockSize;
        s.medium = "GPU";
        b.events.push_back(std::move(s));
      }
    };
    for (size_t g = 0; g < kGroups; ++g) {
      EventBatch b{.ts = 1.7e9};
      stored(g, 0, kSystemBlocks, b);
      warmup.push_back(encode_event_batch(b, EventFormat::kArray));
    }
    for (size_t r = 0; r < kRequests; ++r) {
      EventBatch b{.ts = 1.7e9 + static_cast<double>(r)};
      stored(r, kSystemBlocks, kPromptBlocks, b);
      const size_t old = (r + kRequests - kLive) % kRequests;
      BlockRemoved rm;
      rm.block_hashes.assign(hashes[old].begin() + kSystemBlocks, hashes[old].end());
      rm.medium = "GPU";
      b.events.push_back(std::move(rm));
      block_events_per_batch = count_block_events(b);
      cycle.push_back(encode_event_batch(b, EventFormat::kArray));
    }
  }
};

// Decode + apply without sockets.
void BM_DecodeApply(benchmark::State& state) {
  Corpus corpus(0);
  PreciseIndex index({.model = "bench", .block_size = kBlockSize});
  for (const std::string& p : corpus.warmup) apply_event_batch(index, 0, *decode_event_batch(p));
  for (const std::string& p : corpus.cycle) apply_event_batch(index, 0, *decode_event_batch(p));
  const uint64_t anomalies_before = index.stats(0).anomalies();
  size_t i = 0, events = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& p = corpus.cycle[i++ % corpus.cycle.size()];
    auto b = decode_event_batch(p);
    apply_event_batch(index, 0, *b);
    events += corpus.block_events_per_batch;
    bytes += p.size();
  }
  state.counters["block_events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["MB_per_s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.counters["anomalies"] = static_cast<double>(index.stats(0).anomalies() - anomalies_before);
}
BENCHMARK(BM_DecodeApply)->Unit(benchmark::kMicrosecond)->MinTime(1.0);

// CPU time of the calling thread (the machine is shared: wall-clock rates depend on what
// else runs, CPU time on the receiving threads does not).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Decode only (the subscriber thread's share of the work in strand mode).
void BM_Decode(benchmark::State& state) {
  Corpus corpus(0);
  size_t i = 0, events = 0;
  for (auto _ : state) {
    auto b = decode_event_batch(corpus.cycle[i++ % corpus.cycle.size()]);
    benchmark::DoNotOptimize(b);
    events += corpus.block_events_per_batch;
  }
  state.counters["block_events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMicrosecond)->MinTime(1.0);

// Counts what was applied and wakes the publisher side.
struct Progress {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint64_t> batches;  // applied, per endpoint
  uint64_t total = 0;
  uint64_t block_events = 0;
  uint64_t clears = 0;
  double receive_cpu = 0;  // the subscriber thread's CPU time at its latest delivery
  double apply_cpu = 0;    // the applying thread's, at its latest apply (strand mode)

  explicit Progress(size_t endpoints) : batches(endpoints, 0) {}

  void applied(const io::KvEventDelivery& d) {
    size_t n = 0;
    for (const EventBatch& b : d.batches) n += count_block_events(b);
    {
      std::lock_guard lock(mu);
      batches[d.endpoint] += d.batches.size();
      total += d.batches.size();
      block_events += n;
      clears += d.clear_first;
    }
    cv.notify_all();
  }
  template <typename Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return pred(*this); });
  }
};

// Args: 0 = apply inline on the subscriber's thread, 1 = on a strand (as kvgate serve);
// number of endpoints (one publisher each).
void BM_SubscriberThroughput(benchmark::State& state) {
  namespace asio = boost::asio;
  const bool on_strand = state.range(0) == 1;
  const size_t endpoints = static_cast<size_t>(state.range(1));
  state.SetLabel(on_strand ? "strand" : "inline");

  std::vector<Corpus> corpora;
  std::vector<std::unique_ptr<io::KvEventPublisher>> pubs;
  for (size_t e = 0; e < endpoints; ++e) {
    corpora.emplace_back(static_cast<EndpointId>(e));
    auto p = io::KvEventPublisher::start({.endpoint = "tcp://127.0.0.1:*", .buffer_steps = 16});
    if (!p) {
      state.SkipWithError(p.error().c_str());
      return;
    }
    pubs.push_back(std::move(*p));
  }

  PreciseIndex index({.model = "bench", .block_size = kBlockSize});
  Progress progress(endpoints);
  asio::io_context io;
  auto strand = asio::make_strand(io);
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  auto apply = [&index, &progress, on_strand](const io::KvEventDelivery& d) {
    if (d.clear_first) index.clear_endpoint(d.endpoint);
    for (const EventBatch& b : d.batches) apply_event_batch(index, d.endpoint, b);
    if (on_strand) progress.apply_cpu = thread_cpu_seconds();  // only this thread writes it
    progress.applied(d);
  };
  auto sink = [&](io::KvEventDelivery d) {
    progress.receive_cpu = thread_cpu_seconds();  // only the subscriber thread writes it
    if (!on_strand) return apply(d);
    auto shared = std::make_shared<io::KvEventDelivery>(std::move(d));
    asio::post(strand, [shared, &apply] { apply(*shared); });
  };
  auto sub = io::KvEventSubscriber::create({.poll_interval = kMillisecond}, sink);
  if (!sub) {
    state.SkipWithError(sub.error().c_str());
    return;
  }
  for (size_t e = 0; e < endpoints; ++e) {
    (*sub)->add_source(
        {.endpoint = static_cast<EndpointId>(e), .publisher = pubs[e]->endpoint(), .topic = ""});
  }
  // ZeroMQ's slow joiner: empty batches until every endpoint's stream arrives.
  const std::string probe = encode_event_batch(EventBatch{.ts = 1.7e9}, EventFormat::kArray);
  bool joined = false;
  for (int i = 0; i < 500 && !joined; ++i) {
    for (auto& p : pubs) p->publish(probe);
    joined = progress.wait(
        [](Progress& p) {
          return std::all_of(p.batches.begin(), p.batches.end(), [](uint64_t b) { return b > 0; });
        },
        std::chrono::milliseconds(10));
  }
  if (!joined) {
    state.SkipWithError("subscriber never joined");
    return;
  }

  uint64_t sent = 0;
  auto send = [&](size_t e, const std::string& payload) {
    progress.wait([&](Progress& p) { return sent - p.total < kWindow; });
    pubs[e]->publish(payload);
    ++sent;
  };
  auto settle = [&] {
    if (!progress.wait([&](Progress& p) { return p.total >= sent; })) {
      state.SkipWithError("batches lost");
    }
  };
  // The probes were counted as applied; count what is sent from here on the same way.
  sent = progress.total;
  for (size_t e = 0; e < endpoints; ++e) {
    for (const std::string& w : corpora[e].warmup) send(e, w);
    for (const std::string& c : corpora[e].cycle) send(e, c);
  }
  settle();
  uint64_t anomalies_before = 0;
  for (size_t e = 0; e < endpoints; ++e) anomalies_before += index.stats(e).anomalies();
  const uint64_t events_before = progress.block_events;
  const uint64_t clears_before = progress.clears;
  const double cpu_before = progress.receive_cpu + progress.apply_cpu;

  size_t next = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBatchesPerIteration; ++i, ++next) {
      const size_t e = next % endpoints;
      send(e, corpora[e].cycle[(next / endpoints) % kRequests]);
    }
    settle();
  }
  state.counters["block_events_per_s"] = benchmark::Counter(
      static_cast<double>(progress.block_events - events_before), benchmark::Counter::kIsRate);
  // Per second of CPU on the receiving threads (subscriber, plus the strand's in strand
  // mode): what one dedicated core would take.
  const double cpu = progress.receive_cpu + progress.apply_cpu - cpu_before;
  state.counters["block_events_per_cpu_s"] =
      static_cast<double>(progress.block_events - events_before) / cpu;
  state.counters["batches_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kBatchesPerIteration), benchmark::Counter::kIsRate);
  // Must stay 0: the index understood every event and the stream had no gap.
  uint64_t anomalies = 0;
  for (size_t e = 0; e < endpoints; ++e) anomalies += index.stats(e).anomalies();
  state.counters["anomalies"] = static_cast<double>(anomalies - anomalies_before);
  state.counters["clears"] = static_cast<double>(progress.clears - clears_before);
  sub->reset();
  work.reset();
  io_thread.join();
}
BENCHMARK(BM_SubscriberThroughput)
    ->Args({0, 1})
    ->Args({0, 8})
    ->Args({1, 8})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace
}  // namespace kvgate::kv

BENCHMARK_MAIN();
