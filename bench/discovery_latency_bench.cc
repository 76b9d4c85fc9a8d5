// From a change to the source's report of it, per source, on real inotify, a real DNS
// server (Debian's dnsmasq on a loopback port) and a test Kubernetes API server speaking
// the real wire format (tests/integration/support/fake_kube_api.h). What follows the
// report (the reconciler and the pool's add/remove) is in discovery_bench's figures and in
// kvgate_discovery_apply_seconds.
//
//   BM_FileChangeToReport   rename a new endpoints file over the old (default settle 50 ms)
//   BM_WatchEventToReport   one pod ADDED on a live WATCH
//   BM_DnsChangeToReport    a record added (dnsmasq re-reads its hosts file on SIGHUP),
//                           interval 1 s, TTL 600 s: bounded by one interval
//
//   build/release/discovery_latency_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "../tests/integration/support/fake_kube_api.h"
#include "discovery/dns_source.h"
#include "discovery/file_source.h"
#include "discovery/kubernetes_source.h"
#include "io/subprocess.h"

namespace kvgate::discovery {
namespace {

using Clock = std::chrono::steady_clock;

// Remembers the URLs of the last report; wait_for() until one is there.
class Sink : public SourceSink {
 public:
  void report(std::vector<DiscoveredEndpoint> set, bool) override {
    std::lock_guard lock(mu_);
    urls_.clear();
    for (const auto& e : set) {
      if (e.ready) urls_.insert(e.spec.url);
    }
    cv_.notify_all();
  }
  void error(std::string) override {}
  bool wait_for(const std::string& url, std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return urls_.contains(url); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> urls_;
};

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / fmt::format("{}.{}", name, ::getpid());
  std::filesystem::create_directories(d);
  return d;
}

void BM_FileChangeToReport(benchmark::State& state) {
  const auto dir = temp_dir("discovery_latency_file");
  const std::string path = (dir / "endpoints.yaml").string();
  auto write = [&](int n) {
    std::ofstream(path + ".tmp") << fmt::format("- http://10.0.{}.{}:8000\n", n / 256, n % 256);
    std::filesystem::rename(path + ".tmp", path);
  };
  write(0);
  Sink sink;
  FileSource source({.path = path}, sink);
  if (!source.start().ok() || !sink.wait_for("http://10.0.0.0:8000")) {
    state.SkipWithError("file source did not start");
    return;
  }
  int n = 1;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    write(n);
    if (!sink.wait_for(fmt::format("http://10.0.{}.{}:8000", n / 256, n % 256))) {
      state.SkipWithError("no report");
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    ++n;
  }
  source.stop();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_FileChangeToReport)->UseManualTime()->Iterations(20)->Unit(benchmark::kMillisecond);

void BM_WatchEventToReport(benchmark::State& state) {
  testing::FakeKubeApi api("t");
  const auto dir = temp_dir("discovery_latency_k8s");
  std::ofstream(dir / "kubeconfig")
      << "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n"
         "    server: "
      << api.url()
      << "\ncontexts:\n- name: c\n  context: {cluster: k, user: u, namespace: llm}\n"
         "users:\n- name: u\n  user: {token: t}\n";
  api.upsert(testing::make_pod("vllm-0", "10.1.0.0", 8000, true));
  Sink sink;
  KubernetesSourceConfig c;
  c.selector = "app=vllm";
  c.kubeconfig = (dir / "kubeconfig").string();
  KubernetesSource source(c, sink);
  if (!source.start().ok() || !sink.wait_for("http://10.1.0.0:8000")) {
    state.SkipWithError("kubernetes source did not start");
    return;
  }
  for (int i = 0; i < 200 && api.watches() == 0; ++i) usleep(10'000);
  int n = 1;
  for (auto _ : state) {
    const std::string ip = fmt::format("10.1.{}.{}", n / 256, n % 256);
    const auto t0 = Clock::now();
    api.upsert(testing::make_pod(fmt::format("vllm-{}", n), ip, 8000, true));
    if (!sink.wait_for("http://" + ip + ":8000")) {
      state.SkipWithError("no report");
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    ++n;
  }
  source.stop();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_WatchEventToReport)->UseManualTime()->Iterations(50)->Unit(benchmark::kMillisecond);

uint16_t free_udp_port() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

void BM_DnsChangeToReport(benchmark::State& state) {
  const auto dir = temp_dir("discovery_latency_dns");
  const std::string hosts = (dir / "hosts").string();
  std::string lines = "127.0.1.0 engines.bench\n";
  auto write_hosts = [&] {
    std::ofstream(hosts + ".tmp") << lines;
    std::filesystem::rename(hosts + ".tmp", hosts);
  };
  write_hosts();
  const uint16_t port = free_udp_port();
  auto dns = io::Subprocess::spawn(
      {.argv = {"/usr/sbin/dnsmasq", "--no-daemon", "--no-resolv", "--no-hosts",
                "--conf-file=/dev/null", "--bind-interfaces", "--listen-address=127.0.0.1",
                fmt::format("--port={}", port), "--addn-hosts=" + hosts,
                "--pid-file=" + (dir / "pid").string(), "--local-ttl=600"}});
  if (!dns) {
    state.SkipWithError(dns.error().c_str());
    return;
  }
  Sink sink;
  DnsSourceConfig c;
  c.name = "engines.bench";
  c.port = 8000;
  c.server = fmt::format("127.0.0.1:{}", port);
  c.interval = std::chrono::milliseconds(1000);
  c.min_interval = std::chrono::milliseconds(1000);
  DnsSource source(c, sink);
  (void)source.start();
  if (!sink.wait_for("http://127.0.1.0:8000")) {
    state.SkipWithError("dns source did not start");
    return;
  }
  int n = 1;
  for (auto _ : state) {
    const std::string ip = fmt::format("127.0.{}.{}", 1 + n / 256, n % 256);
    lines += ip + " engines.bench\n";
    const auto t0 = Clock::now();
    write_hosts();
    ::kill((*dns)->pid(), SIGHUP);
    if (!sink.wait_for("http://" + ip + ":8000")) {
      state.SkipWithError("no report");
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    ++n;
  }
  source.stop();
  (void)(*dns)->stop(std::chrono::seconds(2));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_DnsChangeToReport)->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvgate::discovery

BENCHMARK_MAIN();
