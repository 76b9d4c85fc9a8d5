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
// both load the same tokenizer (a tiny one with Qwen3's pre-tokenizer, below). `kvgate
// bench` writes token id i as the word "t<i>"; with the workload's vocab_size 10 every
// word is exactly two tokens (" t" and one digit, as Qwen3 would cut it too), so the
// simulated scenario declares twice the live word counts.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace live_vs_sim_test {

// Wall seconds per model second, on the engines and in `kvgate bench`.
constexpr const char* kTimeScale = "0.5";
constexpr int kEngines = 3;
constexpr int kSystemWords = 400, kQuestionWords = 16;  // per prompt, live

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
  const int system = kSystemWords * tokens_per_word, question = kQuestionWords * tokens_per_word;
  return "name: live-vs-sim\nseed: 7\n"
         "cluster: {engines: " +
         std::to_string(kEngines) + ", profile: " + profile_path +
         ", block_size: 16, num_gpu_blocks: 250}\n"
         "gateway: {model: sim, hop_delay_ms: 1, scrape_interval_ms: 1000, kv_event_delay_ms: "
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

// A tiny byte-level BPE tokenizer in Hugging Face's tokenizer.json format, with Qwen3's
// pre-tokenizer: the 256 byte symbols and one merge ("Ġ" + "t"), so " t5" is two tokens,
// " t" and "5", exactly as Qwen3 cuts it. Engines and gateway load it in milliseconds (the
// real Qwen3 file takes seconds under ASan).
std::string tiny_tokenizer_json() {
  // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others are
  // shifted to U+0100 and up.
  std::vector<int> bytes, chars;
  for (int b = 0; b < 256; ++b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) {
      bytes.push_back(b);
      chars.push_back(b);
    }
  }
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bytes.begin(), bytes.end(), b) == bytes.end()) {
      bytes.push_back(b);
      chars.push_back(256 + shifted++);
    }
  }
  const auto utf8 = [](int cp) {
    std::string out;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
    return out;
  };
  boost::json::object vocab;
  for (size_t i = 0; i < chars.size(); ++i) vocab[utf8(chars[i])] = i;
  vocab["\u0120t"] = chars.size();
  boost::json::object root =
      parse_json(R"json({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
"normalizer": {"type": "NFC"},
"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
"post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
"decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}})json")
          .as_object();
  boost::json::object model{{"type", "BPE"},
                            {"dropout", nullptr},
                            {"unk_token", nullptr},
                            {"continuing_subword_prefix", ""},
                            {"end_of_word_suffix", ""},
                            {"fuse_unk", false},
                            {"byte_fallback", false},
                            {"ignore_merges", false}};
  model["vocab"] = std::move(vocab);
  model["merges"] = boost::json::array{boost::json::array{"\u0120", "t"}};
  root["model"] = std::move(model);
  return boost::json::serialize(root);
}

// Set by the test before any process starts.
std::string g_tokenizer;

// Seconds since the test started, for the log.
double elapsed() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One engine publishing its KV events on a PUB socket the gateway connects to. Spawned
// at once; ready() waits for it, so that several start in parallel.
struct Engine {
  KvEventEndpoints kv_events;  // bound by the engine (read_kv_event_endpoints)
  std::unique_ptr<ChildProcess> proc;
  std::string url;

  explicit Engine(const std::string& profile_path) {
    auto p =
        ChildProcess::spawn(kvgate_bin(), {"engine", "--port", "0", "--model", "sim", "--tokenizer",
                                           g_tokenizer, "--profile", profile_path, "--time-scale",
                                           kTimeScale, "--kv-events-endpoint", "tcp://127.0.0.1:*",
                                           "--replay-endpoint", "tcp://127.0.0.1:*"});
    if (p) {
      proc = std::move(*p);
    } else {
      ADD_FAILURE() << p.error();
    }
  }

  bool ready() {
    if (!proc) return false;
    auto u = proc->wait_for_url(std::chrono::seconds(30));
    if (!u) {
      ADD_FAILURE() << u.error();
      return false;
    }
    url = *u;
    auto endpoints = read_kv_event_endpoints(*proc, std::chrono::seconds(30));
    if (!endpoints) {
      ADD_FAILURE() << endpoints.error();
      return false;
    }
    kv_events = *endpoints;
    Status s = proc->wait_for_status(url + "/health", 200, std::chrono::seconds(30));
    if (!s) ADD_FAILURE() << s.error();
    return static_cast<bool>(s);
  }

  void complete(const std::string& prompt) {
    auto r = io::http_fetch("POST", url + "/v1/completions",
                            R"({"model":"sim","max_tokens":1,"prompt":")" + prompt + R"("})");
    if (!r || r->status != 200) ADD_FAILURE() << "warm-up request failed on " << url;
  }
};
using Engines = std::vector<std::unique_ptr<Engine>>;

// Scrapes every 500 ms with a 500 ms timeout: the gateway forgets an endpoint's KV
// entries when one of its scrapes fails (it may have restarted), which a 100 ms timeout
// on a loaded 2-core machine under ASan can trigger. The simulated scenario scrapes at
// the same model-time interval (1 s at --time-scale 0.5).
std::string gateway_config(const Engines& engines, const std::string& router) {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 5000, drain_ms: 2000, connect_ms: 2000}\n"
      "pools:\n  sim:\n    block_size: 16\n    scrape_interval_ms: 500\n"
      "    tokenizer: " +
      g_tokenizer + "\n    router:\n" + router + "    endpoints:\n";
  for (const auto& e : engines) {
    y += "      - url: " + e->url + "\n        kv_events: {publisher: " + e->kv_events.publisher +
         ", replay: " + e->kv_events.replay + "}\n";
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
  std::string gateway_counters;  // live runs: what explains the routing
};

Figures figures_of(const boost::json::object& policy) {
  Figures f;
  f.hit_rate = policy.at("prefix_hit_rate").to_number<double>();
  f.ttft_p90 = policy.at("ttft_p90_s").to_number<double>();
  f.completed = policy.at("completed").to_number<uint64_t>();
  return f;
}

// The gateway's routing decisions, scrape errors and KV event feed counters.
std::string gateway_counters(const GatewayProcess& gw) {
  auto r = io::http_fetch("GET", gw.url + "/metrics");
  if (!r) return r.error();
  std::string out;
  std::stringstream ss(r->body);
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("kvgate_routing_decisions_total", 0) == 0 ||
        line.rfind("kvgate_scrape_errors_total", 0) == 0 ||
        line.rfind("kvgate_kv_event_", 0) == 0) {
      out += line + "\n";
    }
  }
  return out;
}

// Runs a child to completion (polling, at most `limit`); returns its exit code.
int wait_exit(ChildProcess& p, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (p.running() && std::chrono::steady_clock::now() < deadline) {
    // Waits for the child to exit by itself.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return p.stop();
}

// Until the gateway has received a KV event batch from every engine (ZeroMQ's slow
// joiner: batches published before the SUB connected are lost), warm each engine
// directly with a short prompt unrelated to the workload.
void wait_for_event_feeds(GatewayProcess& gw, Engines& engines) {
  for (size_t i = 0; i < engines.size(); ++i) {
    bool joined = false;
    for (int attempt = 0; attempt < 100 && !joined; ++attempt) {
      engines[i]->complete(words_prompt("join" + std::to_string(i) + "w", 40));
      for (int poll = 0; poll < 10 && !joined; ++poll) {
        joined = gw.metric("kvgate_kv_event_batches_total",
                           {{"pool", "sim"}, {"endpoint", engines[i]->url}}) > 0;
        // Waits for the kvgate serve child to receive the kvgate engine child's KV events.
        if (!joined) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    ASSERT_TRUE(joined) << "no KV events from " << engines[i]->url;
  }
}

// Engines with empty caches (started by the caller) behind a gateway with `router`, then
// `kvgate bench` through it.
Figures run_live(const std::string& label, const std::string& router, bool events, Engines& engines,
                 const std::string& scenario_path, const std::filesystem::path& out) {
  for (auto& e : engines) {
    if (!e->ready()) return {};
  }
  GatewayProcess gw(gateway_config(engines, router));
  if (gw.url.empty()) return {};
  if (events) {
    wait_for_event_feeds(gw, engines);
    if (::testing::Test::HasFatalFailure()) return {};
  }
  std::fprintf(stderr, "[%.1f s] %s: engines and gateway ready\n", elapsed(), label.c_str());
  auto bench = ChildProcess::spawn(
      kvgate_bin(), {"bench", scenario_path, "--url", gw.url, "--time-scale", kTimeScale,
                     "--no-progress", "--label", label, "--timeout", "60", "--out", out.string()});
  if (!bench) {
    ADD_FAILURE() << bench.error();
    return {};
  }
  EXPECT_EQ(wait_exit(**bench, std::chrono::seconds(40)), 0) << (*bench)->errors();
  std::fprintf(stderr, "[%.1f s] %s: bench done\n%s", elapsed(), label.c_str(),
               (*bench)->output().c_str());
  boost::json::object report = read_json(out / "report.json");
  if (!report.contains("policies")) {
    ADD_FAILURE() << "no report from bench: " << (*bench)->output() << (*bench)->errors();
    return {};
  }
  Figures f = figures_of(report.at("policies").as_array().at(0).as_object());
  f.gateway_counters = gateway_counters(gw);
  // Two tokens per word: the engines counted the prompts as the simulation does.
  std::ifstream csv(out / "requests.csv");
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  std::vector<std::string> fields;
  std::stringstream ss(row);
  for (std::string x; std::getline(ss, x, ',');) fields.push_back(x);
  EXPECT_TRUE(fields.size() > 7 && fields[7] == std::to_string(2 * (kSystemWords + kQuestionWords)))
      << row;
  return f;
}

TEST(LiveVsSim, KvAwareAndRandomRoutingRankTheSameLiveAndSimulated) {
  elapsed();
  const auto dir =
      std::filesystem::temp_directory_path() / ("kvgate-live-vs-sim-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string profile = (dir / "profile.yaml").string();
  std::ofstream(profile) << kProfile;
  g_tokenizer = (dir / "tokenizer.json").string();
  std::ofstream(g_tokenizer) << tiny_tokenizer_json();
  const std::string live_scenario = (dir / "live.yaml").string();
  const std::string sim_scenario = (dir / "sim.yaml").string();
  std::ofstream(live_scenario) << scenario_yaml(profile, 1);
  std::ofstream(sim_scenario) << scenario_yaml(profile, 2);

  // Both sets of engines start now, while the simulation runs.
  Engines precise_engines, random_engines;
  for (int i = 0; i < kEngines; ++i) {
    precise_engines.push_back(std::make_unique<Engine>(profile));
    random_engines.push_back(std::make_unique<Engine>(profile));
  }

  // Simulated: both policies on the same arrivals.
  auto sim = ChildProcess::spawn(
      kvgate_bin(), {"sim", sim_scenario, "--no-progress", "--out", (dir / "sim").string()});
  ASSERT_TRUE(sim) << sim.error();
  ASSERT_EQ(wait_exit(**sim, std::chrono::seconds(30)), 0) << (*sim)->errors();
  std::fprintf(stderr, "[%.1f s] simulated:\n%s", elapsed(), (*sim)->output().c_str());
  boost::json::object sim_report = read_json(dir / "sim" / "report.json");
  ASSERT_TRUE(sim_report.contains("policies"));
  const auto& policies = sim_report.at("policies").as_array();
  ASSERT_EQ(policies.size(), 2u);
  const Figures sim_precise = figures_of(policies.at(0).as_object());
  const Figures sim_random = figures_of(policies.at(1).as_object());

  // Live: the same two policies through `kvgate serve`, one after the other.
  const Figures live_precise =
      run_live("precise",
               "      policy: kv-cost\n      params: {overlap_weight: 8}\n      overlap: precise\n",
               true, precise_engines, live_scenario, dir / "live-precise");
  ASSERT_FALSE(HasFatalFailure());
  precise_engines.clear();
  const Figures live_random = run_live("random", "      policy: random\n      overlap: none\n",
                                       false, random_engines, live_scenario, dir / "live-random");

  ASSERT_GT(live_precise.completed, 100u);
  ASSERT_GT(live_random.completed, 100u);
  std::fprintf(stderr,
               "hit rate  sim %.3f vs %.3f, live %.3f vs %.3f\n"
               "p90 TTFT  sim %.3f s vs %.3f s, live %.3f s vs %.3f s\n",
               sim_precise.hit_rate, sim_random.hit_rate, live_precise.hit_rate,
               live_random.hit_rate, sim_precise.ttft_p90, sim_random.ttft_p90,
               live_precise.ttft_p90, live_random.ttft_p90);
  // The same ranking in both worlds, each by a wide margin.
  EXPECT_GT(sim_precise.hit_rate, sim_random.hit_rate + 0.3);
  EXPECT_LT(sim_precise.ttft_p90 * 2, sim_random.ttft_p90);
  EXPECT_GT(live_precise.hit_rate, live_random.hit_rate + 0.2) << "precise gateway:\n"
                                                               << live_precise.gateway_counters;
  EXPECT_LT(live_precise.ttft_p90 * 2, live_random.ttft_p90) << "precise gateway:\n"
                                                             << live_precise.gateway_counters;
  std::filesystem::remove_all(dir);
}

}  // namespace live_vs_sim_test
}  // namespace kvgate::testing
