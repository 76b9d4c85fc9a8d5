// Tokenizer benchmarks: encode throughput (MB/s, tokens/s) of the five fixture families
// (Qwen3 and Llama 3 also on their general path, "<model>_general") on the corpora of
// bench/tokenizer_corpora.mjs, a 7,200-token chat prompt per family (p50/p99 of kvgate's
// render + encode), turn 30 of a 30-turn conversation with the PromptCache, and the
// load time and memory of each loaded tokenizer.
// Needs .deps/fixtures (scripts/bootstrap) and the corpora:
//   node bench/tokenizer_corpora.mjs out/bench/corpora
//   build/release/tokenizer_bench            (env KVGATE_BENCH_CORPORA overrides the dir)
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/prompt_cache.h"
#include "core/tokenizer/tokenizer.h"

namespace {

using kvgate::tokenizer::ChatMessage;
using kvgate::tokenizer::ChatRequest;
using kvgate::tokenizer::ChatTemplate;
using kvgate::tokenizer::PromptCache;
using kvgate::tokenizer::Tokenizer;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "tokenizer_bench: cannot read " << path
              << " (run scripts/bootstrap and node bench/tokenizer_corpora.mjs "
                 "out/bench/corpora)\n";
    std::exit(2);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string fixture(const std::string& model, const std::string& file) {
  const char* d = std::getenv("KVGATE_SOURCE_DIR");
  return read_file(std::string(d ? d : ".") + "/.deps/fixtures/" + model + "/" + file);
}

// "<model>_general": the model's tokenizer with the fast paths disabled.
const Tokenizer& tokenizer(const std::string& model) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[model];
  if (!t) {
    const size_t g = model.find("_general");
    const std::string base = g == std::string::npos ? model : model.substr(0, g);
    auto r =
        Tokenizer::load(fixture(base, "tokenizer.json"), {.fast_paths = g == std::string::npos});
    if (!r) {
      std::cerr << r.error() << "\n";
      std::exit(2);
    }
    t = std::make_unique<Tokenizer>(std::move(*r));
  }
  return *t;
}

// Empty when the corpora were not generated (the benchmarks using them then skip).
const std::vector<std::string>& corpus(const std::string& name) {
  static std::map<std::string, std::vector<std::string>> cache;
  auto& docs = cache[name];
  if (docs.empty()) {
    const char* d = std::getenv("KVGATE_BENCH_CORPORA");
    std::ifstream in(std::string(d ? d : "out/bench/corpora") + "/" + name + ".jsonl");
    for (std::string line; std::getline(in, line);)
      docs.emplace_back(boost::json::parse(line).as_string());
  }
  return docs;
}

// One pass over the corpus per iteration, one document per encode call (like requests).
void BM_Encode(benchmark::State& state, const std::string& model, const std::string& name) {
  const Tokenizer& tok = tokenizer(model);
  const auto& docs = corpus(name);
  if (docs.empty()) {
    state.SkipWithError("no corpora: run node bench/tokenizer_corpora.mjs out/bench/corpora");
    return;
  }
  size_t bytes = 0, tokens = 0;
  std::vector<uint32_t> ids;
  for (auto _ : state) {
    for (const std::string& d : docs) {
      ids.clear();
      if (!tok.encode_into(d, ids).ok()) state.SkipWithError("encode failed");
      tokens += ids.size();
      bytes += d.size();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

// A chat of user/assistant turns built from the prose corpus.
ChatRequest conversation(size_t turns, size_t chars_per_message) {
  const auto& docs = corpus("prose");
  ChatRequest req;
  req.messages.push_back(ChatMessage{"system", "You are a helpful assistant.", {}, {}});
  for (size_t i = 0; i < 2 * turns - 1; ++i) {
    const std::string& d = docs[i % docs.size()];
    req.messages.push_back(ChatMessage{
        i % 2 ? "assistant" : "user", d.substr(0, std::min(d.size(), chars_per_message)), {}, {}});
  }
  return req;
}

const ChatTemplate& qwen3_template() {
  static ChatTemplate t = *ChatTemplate::load(fixture("qwen3", "tokenizer_config.json"));
  return t;
}

// Render + encode a prompt of ~7,200 tokens, no cache.
void BM_ChatPrompt7200(benchmark::State& state) {
  if (corpus("prose").empty()) {
    state.SkipWithError("no corpora: run node bench/tokenizer_corpora.mjs out/bench/corpora");
    return;
  }
  const Tokenizer& tok = tokenizer("qwen3");
  const ChatRequest req = conversation(5, 3950);
  std::vector<uint32_t> ids;
  for (auto _ : state) {
    std::string prompt = *qwen3_template().render(req);
    ids.clear();
    benchmark::DoNotOptimize(tok.encode_into(prompt, ids));
  }
  state.counters["prompt_tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(BM_ChatPrompt7200)->Unit(benchmark::kMicrosecond);

// Turn 30 of a 30-turn conversation when turns 1..29 went through the cache before.
void BM_Turn30WithCache(benchmark::State& state) {
  if (corpus("prose").empty()) {
    state.SkipWithError("no corpora: run node bench/tokenizer_corpora.mjs out/bench/corpora");
    return;
  }
  const Tokenizer& tok = tokenizer("qwen3");
  const std::string turn29 = *qwen3_template().render(conversation(29, 1000));
  const std::string turn30 = *qwen3_template().render(conversation(30, 1000));
  std::vector<uint32_t> ids;
  size_t reused = 0;
  for (auto _ : state) {
    state.PauseTiming();
    PromptCache cache(64 << 20);
    (void)cache.encode(tok, turn29, ids);
    state.ResumeTiming();
    PromptCache::Stats stats;
    benchmark::DoNotOptimize(cache.encode(tok, turn30, ids, &stats));
    reused = stats.reused_ids;
  }
  state.counters["prompt_tokens"] = static_cast<double>(ids.size());
  state.counters["reused_tokens"] = static_cast<double>(reused);
}
BENCHMARK(BM_Turn30WithCache)->Unit(benchmark::kMicrosecond);

// The same turn 30 from scratch, for comparison.
void BM_Turn30NoCache(benchmark::State& state) {
  if (corpus("prose").empty()) {
    state.SkipWithError("no corpora: run node bench/tokenizer_corpora.mjs out/bench/corpora");
    return;
  }
  const Tokenizer& tok = tokenizer("qwen3");
  const std::string turn30 = *qwen3_template().render(conversation(30, 1000));
  std::vector<uint32_t> ids;
  for (auto _ : state) {
    ids.clear();
    benchmark::DoNotOptimize(tok.encode_into(turn30, ids));
  }
  state.counters["prompt_tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(BM_Turn30NoCache)->Unit(benchmark::kMicrosecond);

long rss_kib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * 4;
}

// Load time of tokenizer.json and the memory the loaded tokenizer keeps.
void BM_LoadQwen3(benchmark::State& state) {
  const std::string json = fixture("qwen3", "tokenizer.json");
  size_t held = 0;
  long rss_delta = 0;
  for (auto _ : state) {
    const long before = rss_kib();
    auto t = Tokenizer::load(json);
    rss_delta = rss_kib() - before;
    held = t->memory_bytes();
    benchmark::DoNotOptimize(t);
  }
  state.counters["held_MiB"] = static_cast<double>(held) / (1 << 20);
  state.counters["rss_growth_MiB"] = static_cast<double>(rss_delta) / 1024;
}
BENCHMARK(BM_LoadQwen3)->Unit(benchmark::kMillisecond)->Iterations(3);

// tokenizer_config.json of a family, as a ChatTemplate; Llama 2's gets Meta's Llama-2-chat
// template, which the npm fixture lacks (as in tests/e2e/chat_template_conformance).
const ChatTemplate& chat_template(const std::string& model) {
  static std::map<std::string, std::unique_ptr<ChatTemplate>> cache;
  auto& t = cache[model];
  if (!t) {
    std::string config = fixture(model, "tokenizer_config.json");
    if (model == "llama2") {
      boost::json::value v = boost::json::parse(config);
      const char* d = std::getenv("KVGATE_SOURCE_DIR");
      v.as_object()["chat_template"] =
          read_file(std::string(d ? d : ".") + "/tests/e2e/support/templates/llama2_chat.jinja");
      config = boost::json::serialize(v);
    }
    auto r = ChatTemplate::load(config);
    if (!r) {
      std::cerr << model << ": " << r.error() << "\n";
      std::exit(2);
    }
    t = std::make_unique<ChatTemplate>(std::move(*r));
  }
  return *t;
}

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// A chat prompt of at least 7,200 tokens (a system message, then user/assistant turns of
// 1,200 prose characters, ending on a user turn), rendered by kvgate and encoded, timed
// one by one: p50 and p99 of render + encode, wall and thread CPU time. `fast`: the
// template's hand-written fast path where it has one (Qwen3, Llama 3; proven equal to the
// engine by tests/core/tokenizer/chat_fast_path_test.cc), else kvgate's Jinja engine.
void BM_ChatPromptP99(benchmark::State& state, const std::string& model, bool fast) {
  if (corpus("prose").empty()) {
    state.SkipWithError("no corpora: run node bench/tokenizer_corpora.mjs out/bench/corpora");
    return;
  }
  const Tokenizer& tok = tokenizer(model);
  const ChatTemplate& tpl = chat_template(model);
  kvgate::tokenizer::ChatRenderOptions opt;
  opt.allow_fast_path = fast;
  ChatRequest req;
  std::vector<uint32_t> ids;
  for (size_t turns = 1; ids.size() < 7200; ++turns) {
    req = conversation(turns, 1200);
    auto prompt = tpl.render(req, opt);
    if (!prompt) {
      state.SkipWithError(prompt.error().c_str());
      return;
    }
    ids.clear();
    (void)tok.encode_into(*prompt, ids);
  }
  std::vector<double> wall, cpu;
  size_t bytes = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_us();
    auto prompt = tpl.render(req, opt);
    ids.clear();
    benchmark::DoNotOptimize(tok.encode_into(*prompt, ids));
    cpu.push_back(thread_cpu_us() - c0);
    wall.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    bytes = prompt->size();
  }
  auto pct = [](std::vector<double>& v, size_t p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, v.size() * p / 100)];
  };
  state.counters["prompt_tokens"] = static_cast<double>(ids.size());
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
  state.counters["messages"] = static_cast<double>(req.messages.size());
  state.counters["p50_us"] = pct(wall, 50);
  state.counters["p99_us"] = pct(wall, 99);
  state.counters["cpu_p50_us"] = pct(cpu, 50);
  state.counters["cpu_p99_us"] = pct(cpu, 99);
}

// Live heap bytes (glibc: in-use chunks of every arena plus mmapped chunks).
size_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// Load time and memory of each family's tokenizer: held_MiB is Tokenizer::memory_bytes()
// (tables, added tokens and tries, regexes with their JIT code), heap_MiB the live heap the
// loaded tokenizer keeps (malloc's count after the load's temporaries are freed; without
// PCRE2's JIT code, which is mmapped), rss_growth_MiB the process RSS across the load.
void BM_Load(benchmark::State& state, const std::string& model) {
  const std::string json = fixture(model, "tokenizer.json");
  size_t held = 0, heap = 0;
  long rss_delta = 0;
  for (auto _ : state) {
    const long before = rss_kib();
    const size_t heap_before = heap_in_use();
    auto t = Tokenizer::load(json);
    heap = heap_in_use() - heap_before;
    rss_delta = rss_kib() - before;
    held = t->memory_bytes();
    benchmark::DoNotOptimize(t);
  }
  state.counters["held_MiB"] = static_cast<double>(held) / (1 << 20);
  state.counters["heap_MiB"] = static_cast<double>(heap) / (1 << 20);
  state.counters["rss_growth_MiB"] = static_cast<double>(rss_delta) / 1024;
}

const int kRegistered = [] {
  for (const char* model :
       {"qwen3", "llama3", "deepseek_v3", "gemma3", "llama2", "qwen3_general", "llama3_general"})
    for (const char* name : {"prose", "code", "cjk", "mixed"})
      benchmark::RegisterBenchmark((std::string("BM_Encode/") + model + "/" + name).c_str(),
                                   BM_Encode, std::string(model), std::string(name))
          ->Unit(benchmark::kMillisecond);
  for (const char* model : {"qwen3", "llama3", "deepseek_v3", "gemma3", "llama2"}) {
    benchmark::RegisterBenchmark((std::string("BM_ChatPromptP99/") + model + "/engine").c_str(),
                                 BM_ChatPromptP99, std::string(model), false)
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(1000);
    if (std::string(model) == "qwen3" || std::string(model) == "llama3")
      benchmark::RegisterBenchmark(
          (std::string("BM_ChatPromptP99/") + model + "/fast_path").c_str(), BM_ChatPromptP99,
          std::string(model), true)
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(1000);
    benchmark::RegisterBenchmark((std::string("BM_Load/") + model).c_str(), BM_Load,
                                 std::string(model))
        ->Unit(benchmark::kMillisecond)
        ->Iterations(2);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
