// Live vs simulated: `kvgate bench` through `kvgate serve` over three time-scaled
// `kvgate engine` processes, once with KV-event-driven routing (kv-cost on the precise
// index) and once with random routing, and `kvgate sim` on the same workload, cluster and
// policies. Both must rank the policies the same way: the KV-aware one hits the prefix
// cache far more often and has the lower p90 TTFT.
//
// The workload is chosen so that the gap is large: 8 groups of long shared system
// prompts, engines whose KV pool holds only half the groups, and a prefill rate slow
// enough that random routing (which recomputes the groups on every engine) is near
// saturation while KV-aware routing prefills only the questions.
//
// Tokens: the gateway must cut prompts into the engines' tokens for precise routing, so
// both use the Qwen3 tokenizer fixture. `kvgate bench` writes token id i as the word
// "t<i>"; with the workload's vocab_size 10 every word is exactly two Qwen3 tokens (" t"
// and one digit), so the simulated scenario declares twice the live word counts.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/gateway_fixture.h"

namespace kvgate::testing {
namespace {

// Wall seconds per model second, on the engines and in `kvgate bench`.
constexpr const char* kTimeScale = "0.5";
constexpr int kEngines = 3;

// A slow GPU (2,500 prefill tokens/s, 7 ms decode steps) with a small KV pool of 250
// blocks of 16 tokens: 4,000 tokens, five of the eight 800-token group prefixes.
constexpr const char* kProfile = R"(name: live-vs-sim
base: h100-qwen2.5-7b
step_overhead_s: 0.002
weight_read_s: 0.005
linear_s_per_token: 0.0004
attention_s_per_token_ctx: 0
decode_s_per_ctx_token: 0
preprocess_s_per_prompt_token: 0
num_gpu_blocks: 250
block_size: 16
max_model_len: 4096
)";

// The scenario, with prompt lengths in words (live) or tokens (simulated, 2 per word).
std::string scenario_yaml(const std::string& profile_path, int tokens_per_word) {
  const int system = 400 * tokens_per_word, question = 16 * tokens_per_word;
  return "name: live-vs-sim\nseed: 7\n"
         "cluster: {engines: " +
         std::to_string(kEngines) + ", profile: " + profile_path +
         ", block_size: 16, num_gpu_blocks: 250}\n"
         "gateway: {model: sim, hop_delay_ms: 1, scrape_interval_ms: 100, kv_event_delay_ms: "
         "5}\n"
         "policies:\n"
         "  - {name: precise, policy: kv-cost, params: {overlap_weight: 8}, overlap: precise}\n"
         "  - {name: random, policy: random, overlap: none}\n"
         "workload:\n"
         "  kind: shared_prefix\n"
         "  vocab_size: 10\n"
         "  shared_prefix: {groups: 8, prompts_per_group: 4, system_prompt_tokens: " +
         std::to_string(system) + ", question_tokens: " + std::to_string(question) +
         ", output_tokens: 16}\n"
         "  arrivals:\n"
         "    kind: poisson\n"
         "    stages: [{qps: 6, duration_s: 4, warmup: true}, {qps: 14, duration_s: 10}]\n";
}

// A TCP port free right now (bound to port 0, then released).
std::string free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return std::to_string(ntohs(addr.sin_port));
}

std::string tokenizer_dir() { return source_dir() + "/.deps/fixtures/qwen3"; }

// One engine publishing its KV events on a PUB socket the gateway connects to.
struct Engine {
  std::string pub_port = free_port();
  std::unique_ptr<EngineProcess> process;

  explicit Engine(const std::string& profile_path) {
    process = std::make_unique<EngineProcess>(std::vector<std::string>{
        "--model", "sim", "--tokenizer", tokenizer_dir(), "--profile", profile_path, "--time-scale",
        kTimeScale, "--kv-events-endpoint", "tcp://*:" + pub_port});
  }
  const std::string& url() const { return process->url; }
};

std::string gateway_config(const std::vector<std::unique_ptr<Engine>>& engines,
                           const std::string& router) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 5000, drain_ms: 2000, connect_ms: 2000}\n"
      "pools:\n  sim:\n    block_size: 16\n    scrape_interval_ms: 50\n"
      "    tokenizer: " +
      tokenizer_dir() + "/tokenizer.json\n    router:\n" + router + "    endpoints:\n";
  for (const auto& e : engines) {
    y += "      - url: " + e->url() +
         "\n        kv_events: {publisher: tcp://127.0.0.1:" + e->pub_port + "}\n";
  }
  return y + "models:\n  - name: sim\n    pool: sim\n";
}

boost::json::object read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  boost::json::value v = parse_json(ss.str());
  return v.is_object() ? v.as_object() : boost::json::object{};
}

struct Figures {
  double hit_rate = -1;
  double ttft_p90 = -1;
  uint64_t completed = 0;
};

Figures figures_of(const boost::json::object& policy) {
  Figures f;
  f.hit_rate = policy.at("prefix_hit_rate").to_number<double>();
  f.ttft_p90 = policy.at("ttft_p90_s").to_number<double>();
  f.completed = policy.at("completed").to_number<uint64_t>();
  return f;
}

// Runs a child to completion (polling, at most `limit`); returns its exit code.
int wait_exit(ChildProcess& p, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (p.running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return p.stop();
}

// Until the gateway has received a KV event batch from every engine (ZeroMQ's slow
// joiner: batches published before the SUB connected are lost), warm each engine
// directly with a short prompt unrelated to the workload.
void wait_for_event_feeds(GatewayProcess& gw, std::vector<std::unique_ptr<Engine>>& engines) {
  for (size_t i = 0; i < engines.size(); ++i) {
    bool joined = false;
    for (int attempt = 0; attempt < 100 && !joined; ++attempt) {
      engines[i]->process->post("/v1/completions",
                                R"({"model":"sim","max_tokens":1,"prompt":")" +
                                    words_prompt("join" + std::to_string(i) + "w", 40) + R"("})");
      for (int poll = 0; poll < 10 && !joined; ++poll) {
        joined = gw.metric("kvgate_kv_event_batches_total",
                           {{"pool", "sim"}, {"endpoint", engines[i]->url()}}) > 0;
        if (!joined) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    ASSERT_TRUE(joined) << "no KV events from " << engines[i]->url();
  }
}

// Fresh engines (empty caches) and a gateway with `router`, then `kvgate bench`.
Figures run_live(const std::string& label, const std::string& router, bool events,
                 const std::string& profile_path, const std::string& scenario_path,
                 const std::filesystem::path& out) {
  std::vector<std::unique_ptr<Engine>> engines;
  for (int i = 0; i < kEngines; ++i) {
    engines.push_back(std::make_unique<Engine>(profile_path));
    if (engines.back()->url().empty()) return {};
  }
  GatewayProcess gw(gateway_config(engines, router));
  if (gw.url.empty()) return {};
  if (events) {
    wait_for_event_feeds(gw, engines);
    if (::testing::Test::HasFatalFailure()) return {};
  }
  auto bench = ChildProcess::spawn(
      kvgate_bin(), {"bench", scenario_path, "--url", gw.url, "--time-scale", kTimeScale,
                     "--no-progress", "--label", label, "--timeout", "60", "--out", out.string()});
  if (!bench) {
    ADD_FAILURE() << bench.error();
    return {};
  }
  EXPECT_EQ(wait_exit(**bench, std::chrono::seconds(40)), 0) << (*bench)->errors();
  boost::json::object report = read_json(out / "report.json");
  if (!report.contains("policies")) {
    ADD_FAILURE() << "no report from bench: " << (*bench)->output() << (*bench)->errors();
    return {};
  }
  std::fprintf(stderr, "live %s:\n%s", label.c_str(), (*bench)->output().c_str());
  return figures_of(report.at("policies").as_array().at(0).as_object());
}

TEST(LiveVsSim, KvAwareAndRandomRoutingRankTheSameLiveAndSimulated) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kvgate-live-vs-sim-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string profile = (dir / "profile.yaml").string();
  std::ofstream(profile) << kProfile;
  const std::string live_scenario = (dir / "live.yaml").string();
  const std::string sim_scenario = (dir / "sim.yaml").string();
  std::ofstream(live_scenario) << scenario_yaml(profile, 1);
  std::ofstream(sim_scenario) << scenario_yaml(profile, 2);

  // Simulated: both policies on the same arrivals.
  auto sim = ChildProcess::spawn(
      kvgate_bin(), {"sim", sim_scenario, "--no-progress", "--out", (dir / "sim").string()});
  ASSERT_TRUE(sim) << sim.error();
  ASSERT_EQ(wait_exit(**sim, std::chrono::seconds(30)), 0) << (*sim)->errors();
  std::fprintf(stderr, "simulated:\n%s", (*sim)->output().c_str());
  boost::json::object sim_report = read_json(dir / "sim" / "report.json");
  ASSERT_TRUE(sim_report.contains("policies"));
  const auto& policies = sim_report.at("policies").as_array();
  ASSERT_EQ(policies.size(), 2u);
  const Figures sim_precise = figures_of(policies.at(0).as_object());
  const Figures sim_random = figures_of(policies.at(1).as_object());

  // Live: the same two policies through `kvgate serve`.
  const Figures live_precise =
      run_live("precise",
               "      policy: kv-cost\n      params: {overlap_weight: 8}\n      overlap: precise\n",
               true, profile, live_scenario, dir / "live-precise");
  ASSERT_FALSE(HasFatalFailure());
  const Figures live_random = run_live("random", "      policy: random\n      overlap: none\n",
                                       false, profile, live_scenario, dir / "live-random");

  ASSERT_GT(live_precise.completed, 100u);
  ASSERT_GT(live_random.completed, 100u);
  // The same ranking in both worlds, each by a wide margin.
  EXPECT_GT(sim_precise.hit_rate, sim_random.hit_rate + 0.3);
  EXPECT_GT(live_precise.hit_rate, live_random.hit_rate + 0.3);
  EXPECT_LT(sim_precise.ttft_p90 * 2, sim_random.ttft_p90);
  EXPECT_LT(live_precise.ttft_p90 * 2, live_random.ttft_p90);
  std::fprintf(stderr,
               "hit rate  sim %.3f vs %.3f, live %.3f vs %.3f\n"
               "p90 TTFT  sim %.3f s vs %.3f s, live %.3f s vs %.3f s\n",
               sim_precise.hit_rate, sim_random.hit_rate, live_precise.hit_rate,
               live_random.hit_rate, sim_precise.ttft_p90, sim_random.ttft_p90,
               live_precise.ttft_p90, live_random.ttft_p90);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvgate::testing
