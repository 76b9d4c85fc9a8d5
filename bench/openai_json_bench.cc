// The gateway's JSON work per request: inspect_request on the client's body and
// parse_usage on the engine's answer (or its SSE usage chunk), the one-pass scanner
// (openai/json_fast.h, what the gateway runs) against the Boost.JSON tree parse it falls
// back to (openai/json_dom.h, the implementation before it), side by side. For usage,
// simdjson too, as reference points only (neither is equivalent to the Boost.JSON parse,
// see docs/performance/gateway-json.md): On Demand (skips what it does not read without
// checking it), from a body copied into a reusable padded buffer and from one that has
// the padding already; and the DOM parser (checks everything).
//
//   build/release/openai_json_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true  (one command line)
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <string>

#include "openai/json_dom.h"
#include "openai/json_fast.h"
#include "openai/request.h"
#include "openai/usage.h"

namespace kvgate::openai {
namespace {

// A sentence of everyday chat text, with the escapes real bodies carry.
std::string sentence(int i) {
  return fmt::format(
      "Sentence {} of the conversation: could you explain how the \\\"cache\\\" helps here, "
      "and why it matters?\\n",
      i);
}

// The gateway's own bench request (bench/gateway_vs_nginx.bench.sh).
const std::string kSmallChat =
    R"({"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1})";

// A multi-turn chat of about 4 KB: a system prompt and eight turns.
std::string chat_4k() {
  std::string b = R"({"model":"Qwen/Qwen3-32B","messages":[{"role":"system","content":")";
  b += "You are a helpful assistant. Answer briefly.\"}";
  int s = 0;
  for (int turn = 0; turn < 8; ++turn) {
    std::string text;
    for (int k = 0; k < 4; ++k) text += sentence(s++);
    b += fmt::format(R"(,{{"role":"{}","content":"{}"}})", turn % 2 ? "assistant" : "user", text);
  }
  return b + R"(],"stream":true,"stream_options":{"include_usage":true},"max_tokens":256,)"
             R"("temperature":0.7,"top_p":0.95})";
}

// The same in Chinese (UTF-8, 3 bytes a character): about 4 KB too.
std::string chat_4k_cjk() {
  // "Could you explain how the cache helps here, and why it matters?"
  const std::string line =
      "\xe8\xaf\xb7\xe8\xa7\xa3\xe9\x87\x8a\xe4\xb8\x80\xe4\xb8\x8b"
      "\xe7\xbc\x93\xe5\xad\x98\xe5\x9c\xa8\xe8\xbf\x99\xe9\x87\x8c"
      "\xe6\x9c\x89\xe4\xbb\x80\xe4\xb9\x88\xe7\x94\xa8\xef\xbc\x8c"
      "\xe4\xb8\xba\xe4\xbb\x80\xe4\xb9\x88\xe9\x87\x8d\xe8\xa6\x81"
      "\xef\xbc\x9f\\n";
  std::string b = R"({"model":"m","messages":[)";
  for (int turn = 0; turn < 8; ++turn) {
    std::string text;
    for (int k = 0; k < 8; ++k) text += line;
    b += fmt::format(R"({}{{"role":"{}","content":"{}"}})", turn ? "," : "",
                     turn % 2 ? "assistant" : "user", text);
  }
  return b + R"(],"max_tokens":256})";
}

// A completion request with a 2 KB prompt.
std::string completion_2k() {
  std::string prompt;
  for (int i = 0; prompt.size() < 2048; ++i) prompt += sentence(i);
  return R"({"model":"m","prompt":")" + prompt + R"(","max_tokens":64,"temperature":0})";
}

std::string chat_completion(const std::string& content) {
  return R"({"id":"chatcmpl-8f3a","object":"chat.completion","created":1764500000,)"
         R"("model":"m","choices":[{"index":0,"message":{"role":"assistant","content":")" +
         content +
         R"("},"finish_reason":"stop"}],"usage":{"prompt_tokens":25,"completion_tokens":7,)"
         R"("total_tokens":32,"prompt_tokens_details":{"cached_tokens":16}}})";
}

// A chat.completion of about 300 bytes.
const std::string kSmallAnswer = chat_completion("I am fine, thank you!");

// A chat.completion of about 4 KB.
std::string answer_4k() {
  std::string content;
  for (int i = 0; content.size() < 3800; ++i) content += sentence(i);
  return chat_completion(content);
}

// The usage-only chunk of a stream (the JSON of its `data:` line).
const std::string kUsageChunk =
    R"({"id":"chatcmpl-8f3a","object":"chat.completion.chunk","created":1764500000,)"
    R"("model":"m","choices":[],"usage":{"prompt_tokens":25,"completion_tokens":7,)"
    R"("total_tokens":32,"prompt_tokens_details":{"cached_tokens":16}}})";

template <typename Inspect>
void run_inspect(benchmark::State& state, Inspect inspect, const std::string& body, ApiKind kind) {
  InspectedRequest r;
  if (inspect(body, kind).error || !fast::inspect_request(body, kind, r)) {
    state.SkipWithError("the bench body is refused, or not read by the fast path");
  }
  for (auto _ : state) benchmark::DoNotOptimize(inspect(body, kind));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["bytes"] = static_cast<double>(body.size());
}

template <typename Parse>
void run_usage(benchmark::State& state, Parse parse, const std::string& text) {
  Usage u;
  if (!parse(text).seen || !fast::parse_usage(text, u)) {
    state.SkipWithError("no usage in the bench body, or not read by the fast path");
  }
  for (auto _ : state) benchmark::DoNotOptimize(parse(text));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes"] = static_cast<double>(text.size());
}

Inspection inspect_new(std::string_view b, ApiKind k) { return inspect_request(b, k); }
Inspection inspect_old(std::string_view b, ApiKind k) { return dom::inspect_request(b, k); }
Usage usage_new(std::string_view t) { return parse_usage(t); }
Usage usage_old(std::string_view t) { return dom::parse_usage(t); }

std::string show_usage(const Usage& u) {
  return fmt::format("{}/{}/{}/{}", u.seen, u.prompt_tokens, u.completion_tokens, u.cached_tokens);
}

// simdjson On Demand: the top-level usage, found by key, the rest skipped unchecked.
template <bool kCopy>
Usage usage_ondemand(std::string_view t) {
  thread_local simdjson::ondemand::parser parser;
  thread_local std::string buffer;
  simdjson::padded_string_view in;
  if constexpr (kCopy) {
    buffer.reserve(t.size() + simdjson::SIMDJSON_PADDING);
    buffer.assign(t);
    in = simdjson::padded_string_view(buffer.data(), t.size(), buffer.capacity());
  } else {
    in = simdjson::padded_string_view(t.data(), t.size(), t.size() + simdjson::SIMDJSON_PADDING);
  }
  Usage u;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object usage;
  if (parser.iterate(in).get(doc) || doc.find_field_unordered("usage").get_object().get(usage)) {
    return u;
  }
  u.seen = true;
  for (auto field : usage) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return Usage{};
    uint64_t n = 0;
    if (key == "prompt_tokens") {
      if (!field.value().get_uint64().get(n)) u.prompt_tokens = n;
    } else if (key == "completion_tokens") {
      if (!field.value().get_uint64().get(n)) u.completion_tokens = n;
    } else if (key == "prompt_tokens_details") {
      simdjson::ondemand::object d;
      if (!field.value().get_object().get(d) && !d["cached_tokens"].get_uint64().get(n)) {
        u.cached_tokens = n;
      }
    }
  }
  return u;
}

// simdjson DOM: the whole text parsed and checked (it pads a copy itself when it must).
Usage usage_simdjson_dom(std::string_view t) {
  thread_local simdjson::dom::parser parser;
  Usage u;
  simdjson::dom::object usage;
  if (parser.parse(t.data(), t.size()).get_object()["usage"].get_object().get(usage)) return u;
  u.seen = true;
  uint64_t n = 0;
  if (!usage["prompt_tokens"].get_uint64().get(n)) u.prompt_tokens = n;
  if (!usage["completion_tokens"].get_uint64().get(n)) u.completion_tokens = n;
  if (!usage["prompt_tokens_details"]["cached_tokens"].get_uint64().get(n)) u.cached_tokens = n;
  return u;
}

// The padded variant reads past the text: bodies with SIMDJSON_PADDING spare bytes after.
std::string padded(const std::string& s) {
  std::string p = s;
  p.reserve(s.size() + simdjson::SIMDJSON_PADDING);
  return p;
}

const std::string kChat4k = chat_4k();
const std::string kChat4kCjk = chat_4k_cjk();
const std::string kCompletion2k = completion_2k();
const std::string kAnswer4k = answer_4k();

BENCHMARK_CAPTURE(run_inspect, small_chat_old, inspect_old, kSmallChat, ApiKind::kChat);
BENCHMARK_CAPTURE(run_inspect, small_chat_new, inspect_new, kSmallChat, ApiKind::kChat);
BENCHMARK_CAPTURE(run_inspect, chat_4k_old, inspect_old, kChat4k, ApiKind::kChat);
BENCHMARK_CAPTURE(run_inspect, chat_4k_new, inspect_new, kChat4k, ApiKind::kChat);
BENCHMARK_CAPTURE(run_inspect, chat_4k_cjk_old, inspect_old, kChat4kCjk, ApiKind::kChat);
BENCHMARK_CAPTURE(run_inspect, chat_4k_cjk_new, inspect_new, kChat4kCjk, ApiKind::kChat);
BENCHMARK_CAPTURE(run_inspect, completion_2k_old, inspect_old, kCompletion2k, ApiKind::kCompletion);
BENCHMARK_CAPTURE(run_inspect, completion_2k_new, inspect_new, kCompletion2k, ApiKind::kCompletion);

const std::string kSmallAnswerPadded = padded(kSmallAnswer);
const std::string kAnswer4kPadded = padded(kAnswer4k);
const std::string kUsageChunkPadded = padded(kUsageChunk);

BENCHMARK_CAPTURE(run_usage, answer_300b_old, usage_old, kSmallAnswer);
BENCHMARK_CAPTURE(run_usage, answer_300b_new, usage_new, kSmallAnswer);
BENCHMARK_CAPTURE(run_usage, answer_4k_old, usage_old, kAnswer4k);
BENCHMARK_CAPTURE(run_usage, answer_4k_new, usage_new, kAnswer4k);
BENCHMARK_CAPTURE(run_usage, sse_chunk_old, usage_old, kUsageChunk);
BENCHMARK_CAPTURE(run_usage, sse_chunk_new, usage_new, kUsageChunk);

void run_reference(benchmark::State& state, Usage (*parse)(std::string_view),
                   const std::string& text) {
  if (show_usage(parse(text)) != show_usage(usage_old(text))) {
    state.SkipWithError("reads another usage than the Boost.JSON parse");
  }
  for (auto _ : state) benchmark::DoNotOptimize(parse(text));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK_CAPTURE(run_reference, answer_300b_simdjson_ondemand_copy, usage_ondemand<true>,
                  kSmallAnswer);
BENCHMARK_CAPTURE(run_reference, answer_300b_simdjson_ondemand_padded, usage_ondemand<false>,
                  kSmallAnswerPadded);
BENCHMARK_CAPTURE(run_reference, answer_300b_simdjson_dom, usage_simdjson_dom, kSmallAnswer);
BENCHMARK_CAPTURE(run_reference, answer_4k_simdjson_ondemand_copy, usage_ondemand<true>, kAnswer4k);
BENCHMARK_CAPTURE(run_reference, answer_4k_simdjson_ondemand_padded, usage_ondemand<false>,
                  kAnswer4kPadded);
BENCHMARK_CAPTURE(run_reference, answer_4k_simdjson_dom, usage_simdjson_dom, kAnswer4k);
BENCHMARK_CAPTURE(run_reference, sse_chunk_simdjson_ondemand_copy, usage_ondemand<true>,
                  kUsageChunk);
BENCHMARK_CAPTURE(run_reference, sse_chunk_simdjson_ondemand_padded, usage_ondemand<false>,
                  kUsageChunkPadded);
BENCHMARK_CAPTURE(run_reference, sse_chunk_simdjson_dom, usage_simdjson_dom, kUsageChunk);

}  // namespace
}  // namespace kvgate::openai

BENCHMARK_MAIN();
