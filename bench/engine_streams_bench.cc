// Macro benchmark: one `kvgate engine` process holding thousands of concurrent SSE streams.
//
// Spawns the kvgate binary ($KVGATE_BIN, default build/release/kvgate) as its own
// process, opens N client connections at once (one asio thread in this process), each
// streaming a completion of T tokens, and checks every stream delivers exactly T token
// events and [DONE]. Reports peak concurrent streams seen by the engine's own
// vllm:num_requests_running gauge, client-side completion, TTFT and the engine process's
// CPU time (utime + stime from /proc) for the whole run.
//
//   KVGATE_BIN=build/release/kvgate build/release/engine_streams_bench
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/metrics/prometheus_text.h"
#include "io/http_client.h"

extern char** environ;

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Engine {
  pid_t pid = -1;
  std::string url;
  uint16_t port = 0;
  std::string dir;
};

Engine spawn_engine(const std::vector<std::string>& extra) {
  Engine e;
  const char* bin_env = std::getenv("KVGATE_BIN");
  const std::string bin = bin_env ? bin_env : "build/release/kvgate";
  char tmpl[] = "/tmp/kvgate-bench-XXXXXX";
  e.dir = mkdtemp(tmpl);
  const std::string out = e.dir + "/stdout";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (e.dir + "/stderr").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> args = {bin, "engine", "--port", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&e.pid, bin.c_str(), &fa, nullptr, argv.data(), environ) != 0) e.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  for (int i = 0; i < 2000 && e.pid > 0; ++i) {
    std::ifstream in(out);
    std::stringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    const size_t at = text.find("listening on http://");
    if (at != std::string::npos && text.find("ready") != std::string::npos) {
      e.url = text.substr(at + 13, text.find('\n', at) - at - 13);
      e.port = static_cast<uint16_t>(std::stoi(e.url.substr(e.url.rfind(':') + 1)));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return e;
}

void stop_engine(Engine& e) {
  if (e.pid <= 0) return;
  kill(e.pid, SIGTERM);
  int st = 0;
  waitpid(e.pid, &st, 0);
  std::string cmd = "rm -rf " + e.dir;
  (void)std::system(cmd.c_str());
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string f;
  std::vector<std::string> fields;
  while (rest >> f) fields.push_back(f);
  // Fields after the command: state(0) ... utime(11) stime(12).
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
}

struct StreamResult {
  int events = 0;
  bool done = false;
  double ttft_s = -1;
};

net::awaitable<void> one_stream(tcp::endpoint ep, std::string request, StreamResult& r,
                                int& open_now, int& peak_open) {
  constexpr auto kTuple = net::as_tuple(net::use_awaitable);
  auto ex = co_await net::this_coro::executor;
  tcp::socket s(ex);
  const auto t0 = Clock::now();
  auto [cec] = co_await s.async_connect(ep, kTuple);
  if (cec) co_return;
  peak_open = std::max(peak_open, ++open_now);
  auto [wec, wn] = co_await net::async_write(s, net::buffer(request), kTuple);
  (void)wn;
  std::string body;
  char buf[8192];
  size_t scanned = 0;
  while (!wec) {
    auto [rec, n] = co_await s.async_read_some(net::buffer(buf), kTuple);
    if (n > 0) body.append(buf, n);
    // Count complete "data: " events as they arrive.
    size_t at;
    while ((at = body.find("data: ", scanned)) != std::string::npos) {
      const size_t end = body.find("\n\n", at);
      if (end == std::string::npos) break;
      const std::string_view ev(body.data() + at + 6, end - at - 6);
      if (ev == "[DONE]") {
        r.done = true;
      } else if (ev.find("\"text\":\"\"") == std::string_view::npos) {
        if (r.events == 0) r.ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
        ++r.events;
      }
      scanned = end + 2;
    }
    if (rec || r.done) break;
  }
  --open_now;
}

void BM_EngineConcurrentStreams(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  const int tokens = static_cast<int>(state.range(1));
  for (auto _ : state) {
    Engine e = spawn_engine({"--max-num-seqs", std::to_string(streams), "--max-num-batched-tokens",
                             "65536", "--num-gpu-blocks", "200000", "--http-threads",
                             std::getenv("HTTP_THREADS") ? std::getenv("HTTP_THREADS") : "2"});
    if (e.url.empty()) {
      state.SkipWithError("engine did not start (set KVGATE_BIN)");
      return;
    }
    const double cpu0 = cpu_seconds(e.pid);
    net::io_context ioc;
    const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), e.port);
    std::vector<StreamResult> results(static_cast<size_t>(streams));
    int open_now = 0, peak_open = 0;
    for (int i = 0; i < streams; ++i) {
      const std::string body = R"({"prompt":"stream )" + std::to_string(i) +
                               R"( asks for tokens","max_tokens":)" + std::to_string(tokens) +
                               R"(,"stream":true})";
      const std::string req =
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
          "Content-Type: application/json\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      net::co_spawn(ioc, one_stream(ep, req, results[static_cast<size_t>(i)], open_now, peak_open),
                    net::detached);
    }
    // Sample the engine's running gauge while the streams are in flight.
    double peak_running = 0;
    std::atomic<bool> finished{false};
    std::thread sampler([&] {
      while (!finished.load()) {
        auto r = kvgate::io::http_fetch("GET", e.url + "/metrics");
        if (r) {
          auto m = kvgate::metrics::parse_prometheus_text(r->body);
          if (m)
            peak_running =
                std::max(peak_running, m->value("vllm:num_requests_running").value_or(0));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    const auto t0 = Clock::now();
    ioc.run();
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    finished.store(true);
    sampler.join();
    const double cpu = cpu_seconds(e.pid) - cpu0;
    stop_engine(e);
    int complete = 0;
    std::vector<double> ttft;
    for (const auto& r : results) {
      if (r.done && r.events == tokens) ++complete;
      if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
    }
    std::sort(ttft.begin(), ttft.end());
    state.SetIterationTime(wall);
    state.counters["streams"] = streams;
    state.counters["complete_exact"] = complete;
    state.counters["peak_client_open"] = peak_open;
    state.counters["peak_engine_running"] = peak_running;
    state.counters["engine_cpu_s"] = cpu;
    state.counters["wall_s"] = wall;
    state.counters["tokens_per_s"] = static_cast<double>(complete) * tokens / wall;
    state.counters["ttft_p50_s"] = ttft.empty() ? -1 : ttft[ttft.size() / 2];
    state.counters["ttft_p99_s"] = ttft.empty() ? -1 : ttft[ttft.size() * 99 / 100];
    if (complete != streams) state.SkipWithError("some streams did not complete exactly");
  }
}

BENCHMARK(BM_EngineConcurrentStreams)
    ->Args({500, 64})
    ->Args({5000, 64})
    ->Args({8000, 32})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
