// Tokenizer benchmarks: encode throughput (MB/s, tokens/s) of the five fixture families
// (Qwen3 and Llama 3 also on their general path, "<model>_general") on the corpora of
// bench/tokenizer_corpora.mjs, a 7,200-token chat prompt per family (p50/p99 of
// render + encode), turn 30 of a 30-turn conversation with the PromptCache, and the
// load time and memory of each loaded tokenizer.
// Needs .deps/fixtures (scripts/bootstrap) and the corpora:
//   node bench/tokenizer_corpora.mjs out/bench/corpora
//   node bench/tokenizer_chat_prompts.mjs out/bench/corpora
//   build/release/tokenizer_bench            (env KVGATE_BENCH_CORPORA overrides the dir)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
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

// A ~7,200-token chat prompt, timed one by one: p50 and p99 of render + encode. Qwen3 and
// Llama 3 render with kvgate's C++ templates inside the timing; the other families encode
// the prompt bench/tokenizer_chat_prompts.mjs rendered with their template (@huggingface/jinja).
void BM_ChatPromptP99(benchmark::State& state, const std::string& model) {
  const Tokenizer& tok = tokenizer(model);
  std::optional<ChatTemplate> tpl;
  ChatRequest req;
  std::string prompt;
  if (model == "qwen3" || model == "llama3") {
    tpl = *ChatTemplate::load(fixture(model, "tokenizer_config.json"));
    if (corpus("prose").empty()) {
      state.SkipWithError("no corpora: run node bench/tokenizer_corpora.mjs out/bench/corpora");
      return;
    }
    std::vector<uint32_t> probe;
    for (size_t turns = 1; probe.size() < 7200; ++turns) {
      req = conversation(turns, 1200);
      probe.clear();
      (void)tok.encode_into(*tpl->render(req), probe);
    }
  } else {
    const char* d = std::getenv("KVGATE_BENCH_CORPORA");
    std::ifstream in(std::string(d ? d : "out/bench/corpora") + "/chat_" + model + ".json");
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().empty()) {
      state.SkipWithError(
          "no prompts: run node bench/tokenizer_chat_prompts.mjs out/bench/corpora");
      return;
    }
    prompt = std::string(boost::json::parse(ss.str()).as_string());
  }
  std::vector<double> us;
  std::vector<uint32_t> ids;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (tpl) prompt = *tpl->render(req);
    ids.clear();
    benchmark::DoNotOptimize(tok.encode_into(prompt, ids));
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  state.counters["prompt_tokens"] = static_cast<double>(ids.size());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
}

// Load time and memory of each family's tokenizer.
void BM_Load(benchmark::State& state, const std::string& model) {
  const std::string json = fixture(model, "tokenizer.json");
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

const int kRegistered = [] {
  for (const char* model :
       {"qwen3", "llama3", "deepseek_v3", "gemma3", "llama2", "qwen3_general", "llama3_general"})
    for (const char* name : {"prose", "code", "cjk", "mixed"})
      benchmark::RegisterBenchmark((std::string("BM_Encode/") + model + "/" + name).c_str(),
                                   BM_Encode, std::string(model), std::string(name))
          ->Unit(benchmark::kMillisecond);
  for (const char* model : {"qwen3", "llama3", "deepseek_v3", "gemma3", "llama2"}) {
    benchmark::RegisterBenchmark((std::string("BM_ChatPromptP99/") + model).c_str(),
                                 BM_ChatPromptP99, std::string(model))
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(300);
    benchmark::RegisterBenchmark((std::string("BM_Load/") + model).c_str(), BM_Load,
                                 std::string(model))
        ->Unit(benchmark::kMillisecond)
        ->Iterations(2);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
