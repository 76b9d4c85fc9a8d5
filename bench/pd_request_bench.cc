// The gateway's own CPU work per disaggregated request: building the prefill hop's body,
// reading kv_transfer_params from the prefill answer, building the decode hop's body
// (src/openai/pd_request.h), for a chat request of 7,200 words (~57 KB of text in 24
// messages, about 7,200 tokens) and a prefill answer listing its 450 block ids.
//
//   build/release/pd_request_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "openai/pd_request.h"

namespace kvgate::openai {
namespace {

std::string chat_body() {
  std::string b = R"({"model":"Qwen/Qwen3-32B","stream":true,"max_tokens":256,)"
                  R"("stream_options":{"include_usage":true},"messages":[)";
  for (int m = 0; m < 24; ++m) {
    if (m > 0) b += ",";
    std::string text;
    for (int w = 0; w < 300; ++w) text += fmt::format("word{} ", (m * 300 + w) % 977);
    b += fmt::format(R"({{"role":"{}","content":"{}"}})", m % 2 ? "assistant" : "user", text);
  }
  return b + "]}";
}

std::string prefill_answer() {
  std::string blocks;
  for (int i = 0; i < 450; ++i) blocks += (i ? "," : "") + std::to_string(1000 + i);
  return R"({"id":"chatcmpl-1","object":"chat.completion","model":"Qwen/Qwen3-32B",)"
         R"("choices":[{"index":0,"message":{"role":"assistant","content":"x"},)"
         R"("finish_reason":"length"}],"usage":{"prompt_tokens":7200,"completion_tokens":1,)"
         R"("total_tokens":7201},"kv_transfer_params":{"do_remote_prefill":true,)"
         R"("do_remote_decode":false,"remote_block_ids":[)" +
         blocks +
         R"(],"remote_engine_id":"engine-7f3a","remote_host":"10.0.0.7",)"
         R"("remote_port":5600,"tp_size":1}})";
}

void BM_PrefillBody(benchmark::State& state) {
  const std::string body = chat_body();
  for (auto _ : state) benchmark::DoNotOptimize(prefill_body(body));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_PrefillBody);

void BM_TransferParams(benchmark::State& state) {
  const std::string answer = prefill_answer();
  for (auto _ : state) benchmark::DoNotOptimize(transfer_params_of(answer));
}
BENCHMARK(BM_TransferParams);

void BM_DecodeBody(benchmark::State& state) {
  const std::string body = chat_body();
  const std::string params = **transfer_params_of(prefill_answer());
  for (auto _ : state) benchmark::DoNotOptimize(decode_body(body, params));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_DecodeBody);

// All three, as one P/D request costs.
void BM_TwoHopBodies(benchmark::State& state) {
  const std::string body = chat_body();
  const std::string answer = prefill_answer();
  for (auto _ : state) {
    auto p = prefill_body(body);
    auto kt = transfer_params_of(answer);
    auto d = decode_body(body, kt->value_or(""));
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_TwoHopBodies);

}  // namespace
}  // namespace kvgate::openai

BENCHMARK_MAIN();
