// The HTTP/1.1 heads on every proxied request's path, read by kvgate's one-pass parser
// (io/http_head.h, what the server and the upstream client run on a plain head) and by
// Beast's parser (what they run on anything else, and ran on everything before), side by
// side on the same bytes: wrk's request, the openai npm client's, nginx's response and
// uvicorn's (vLLM's server). Beast's figure includes its field callbacks doing nothing.
//
//   build/release/http_head_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true  (one command line)
#include <benchmark/benchmark.h>

#include <boost/beast/http.hpp>
#include <string>

#include "io/http_head.h"

namespace kvgate::io {
namespace {

namespace http = boost::beast::http;

// bench/gateway_peers.sh's request and answer.
const std::string kRequestBody =
    R"({"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}],)"
    R"("max_tokens":1})";
const std::string kResponseBody =
    R"({"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":)"
    R"({"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,)"
    R"("completion_tokens":1,"total_tokens":10}})";

const std::string kWrkRequest =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 93\r\n"
    "Content-Type: application/json\r\n\r\n" +
    kRequestBody;
const std::string kOpenAiRequest =
    "POST /v1/chat/completions HTTP/1.1\r\naccept: application/json\r\n"
    "authorization: Bearer kvg-0123456789abcdef0123456789abcdef\r\n"
    "content-type: application/json\r\nuser-agent: OpenAI/JS 4.77.0\r\nx-stainless-lang: js\r\n"
    "x-stainless-retry-count: 0\r\nx-stainless-timeout: 600000\r\ncontent-length: 93\r\n"
    "Accept-Encoding: gzip,deflate\r\nHost: 127.0.0.1:41000\r\nConnection: keep-alive\r\n\r\n";
const std::string kNginxResponse =
    "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 30 Nov 2026 10:00:00 GMT\r\n"
    "Content-Type: application/json\r\nContent-Length: 216\r\nConnection: keep-alive\r\n\r\n" +
    kResponseBody;
const std::string kUvicornResponse =
    "HTTP/1.1 200 OK\r\ndate: Mon, 30 Nov 2026 10:00:00 GMT\r\nserver: uvicorn\r\n"
    "content-length: 216\r\ncontent-type: application/json\r\n\r\n" +
    kResponseBody;

// Beast's parser with callbacks that keep nothing.
template <bool isRequest>
class NullParser final : public http::basic_parser<isRequest> {
  void on_request_impl(http::verb, boost::beast::string_view, boost::beast::string_view, int,
                       boost::beast::error_code&) override {}
  void on_response_impl(int, boost::beast::string_view, int, boost::beast::error_code&) override {}
  void on_field_impl(http::field, boost::beast::string_view, boost::beast::string_view,
                     boost::beast::error_code&) override {}
  void on_header_impl(boost::beast::error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&,
                         boost::beast::error_code&) override {}
  size_t on_body_impl(boost::beast::string_view b, boost::beast::error_code&) override {
    return b.size();
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view,
                            boost::beast::error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view b,
                            boost::beast::error_code&) override {
    return b.size();
  }
  void on_finish_impl(boost::beast::error_code&) override {}
};

template <bool isRequest>
void ours(benchmark::State& state, const std::string& head) {
  ParsedHead h;
  for (auto _ : state) {
    const HeadParse r =
        isRequest ? parse_request_head(head, 16384, h) : parse_response_head(head, 16384, h);
    if (r != HeadParse::kDone) state.SkipWithError("not a plain head");
    benchmark::DoNotOptimize(h.field_count);
  }
}

template <bool isRequest>
void beast(benchmark::State& state, const std::string& head) {
  for (auto _ : state) {
    NullParser<isRequest> p;
    p.eager(false);
    boost::beast::error_code ec;
    p.put(boost::asio::buffer(head), ec);
    if (ec || !p.is_header_done()) state.SkipWithError("Beast did not take the head");
    benchmark::DoNotOptimize(p.content_length());
  }
}

void ours_request(benchmark::State& s, const std::string& head) { ours<true>(s, head); }
void beast_request(benchmark::State& s, const std::string& head) { beast<true>(s, head); }
void ours_response(benchmark::State& s, const std::string& head) { ours<false>(s, head); }
void beast_response(benchmark::State& s, const std::string& head) { beast<false>(s, head); }

BENCHMARK_CAPTURE(ours_request, wrk, kWrkRequest);
BENCHMARK_CAPTURE(beast_request, wrk, kWrkRequest);
BENCHMARK_CAPTURE(ours_request, openai_npm, kOpenAiRequest);
BENCHMARK_CAPTURE(beast_request, openai_npm, kOpenAiRequest);
BENCHMARK_CAPTURE(ours_response, nginx, kNginxResponse);
BENCHMARK_CAPTURE(beast_response, nginx, kNginxResponse);
BENCHMARK_CAPTURE(ours_response, uvicorn, kUvicornResponse);
BENCHMARK_CAPTURE(beast_response, uvicorn, kUvicornResponse);

}  // namespace
}  // namespace kvgate::io

BENCHMARK_MAIN();
