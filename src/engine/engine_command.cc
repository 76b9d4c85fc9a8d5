#include "engine/engine_command.h"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "engine/engine_server.h"
#include "env/exit_code.h"
#include "env/file.h"
#include "io/process_launch_time.h"

namespace kvgate::engine_server {
namespace {

struct Flags {
  EngineServerOptions o;
  std::string profile = "h100-qwen2.5-7b";
  std::string startup = "none";
  std::string role = "both";
  std::string format = "array";
  bool no_prefix_caching = false;
  double host_gbps = 0;  // --host-gbps: 0, the profile's host link
  double disk_gbps = 0;  // --disk-gbps: 0, the profile's disk read bandwidth
  std::string tokenizer;
  std::vector<std::string> lora_modules;  // NAME=PATH
};

using env::read_file;

// --tokenizer: a tokenizer.json, or a directory with tokenizer.json and (optionally)
// tokenizer_config.json for the chat template.
Result<std::unique_ptr<TextCodec>> load_codec(const Flags& f) {
  if (f.tokenizer.empty()) return make_word_codec(f.o.engine.vocab_size);
  std::string json_path = f.tokenizer;
  std::string config_text;
  if (std::filesystem::is_directory(f.tokenizer)) {
    json_path = f.tokenizer + "/tokenizer.json";
    if (auto c = read_file(f.tokenizer + "/tokenizer_config.json")) config_text = std::move(*c);
  }
  auto json = read_file(json_path);
  if (!json) return Error("--tokenizer: cannot read " + json_path);
  auto codec = make_tokenizer_codec(*json, config_text);
  if (!codec) return Error("--tokenizer " + f.tokenizer + ": " + codec.error());
  return codec;
}

Result<engine::Profile> load_profile(const std::string& name_or_path) {
  for (std::string_view n : engine::builtin_profile_names()) {
    if (n == name_or_path) return engine::builtin_profile(name_or_path);
  }
  Result<std::string> text = env::read_file(name_or_path);
  if (!text) {
    std::string names;
    for (std::string_view n : engine::builtin_profile_names()) {
      names += names.empty() ? "" : ", ";
      names += n;
    }
    return Error("--profile: \"" + name_or_path + "\" is neither a built-in profile (" + names +
                 ") nor a readable YAML file (" + text.error() + ")");
  }
  auto p = engine::parse_profile_yaml(*text);
  if (!p) return Error("--profile " + name_or_path + ": " + p.error());
  return p;
}

int run(Flags& f) {
  auto mode = engine::parse_startup_mode(f.startup);
  if (!mode) {
    std::fprintf(stderr, "kvgate engine: --startup must be none, cold or caches-kept\n");
    return 2;
  }
  f.o.startup = *mode;
  auto role = engine::parse_role(f.role);
  if (!role) {
    std::fprintf(stderr, "kvgate engine: --role must be prefill, decode or both\n");
    return 2;
  }
  f.o.engine.role = *role;
  auto format = kv::parse_event_format(f.format);
  if (!format) {
    std::fprintf(stderr, "kvgate engine: --kv-events-format: %s\n", format.error().c_str());
    return 2;
  }
  f.o.kv_events_format = *format;
  f.o.engine.enable_prefix_caching = !f.no_prefix_caching;
  f.o.engine.host_bytes_per_s = f.host_gbps * 1e9;
  f.o.engine.disk_bytes_per_s = f.disk_gbps * 1e9;
  for (const std::string& m : f.lora_modules) {
    const size_t eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
      std::fprintf(stderr, "kvgate engine: --lora-modules: expected NAME=PATH, got '%s'\n",
                   m.c_str());
      return 2;
    }
    f.o.lora_modules.emplace_back(m.substr(0, eq), m.substr(eq + 1));
  }
  if (!f.o.lora_modules.empty() && f.o.max_loras == 0) {
    std::fprintf(stderr, "kvgate engine: --lora-modules needs --max-loras N (LoRA is off)\n");
    return 2;
  }
  auto profile = load_profile(f.profile);
  if (!profile) {
    std::fprintf(stderr, "kvgate engine: %s\n", profile.error().c_str());
    return 2;
  }
  f.o.announce = true;
  auto codec = load_codec(f);
  if (!codec) {
    std::fprintf(stderr, "kvgate engine: %s\n", codec.error().c_str());
    return 2;
  }
  // Block SIGINT/SIGTERM in every thread; the main thread waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  f.o.launched_at = io::process_launch_time();
  auto server = EngineServer::start(f.o, std::move(*profile), std::move(*codec));
  if (!server) {
    std::fprintf(stderr, "kvgate engine: %s\n", server.error().c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "kvgate engine: signal %d, stopping\n", sig);
  (*server)->stop();
  return 0;
}

}  // namespace

void add_engine_command(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  EngineServerOptions& o = flags->o;
  CLI::App* cmd = app.add_subcommand(
      "engine",
      "Run a simulated vLLM-compatible inference server: OpenAI API (streaming), vLLM "
      "metrics, KV events over ZeroMQ, startup phases, P/D roles, fault injection.");
  cmd->add_option("--model", o.served_model_name, "Served model name")->capture_default_str();
  cmd->add_option("--host", o.host, "Listen address")->capture_default_str();
  cmd->add_option("--port", o.port, "HTTP port (0: ephemeral, printed on stdout)")
      ->capture_default_str();
  cmd->add_option("--http-threads", o.http_threads, "HTTP I/O threads")->capture_default_str();
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "tokenizer.json, or a directory with tokenizer.json and tokenizer_config.json "
                  "(chat template); default: one token per whitespace-separated word");
  cmd->add_option("--profile", flags->profile,
                  "Timing profile: h100-qwen2.5-7b, 2xh100-qwen3-32b, or a YAML file")
      ->capture_default_str();
  cmd->add_option("--num-gpu-blocks", o.engine.num_gpu_blocks, "KV cache blocks (0: the profile's)")
      ->capture_default_str();
  cmd->add_option("--block-size", o.engine.block_size, "Tokens per KV block (0: the profile's)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", o.engine.max_num_seqs, "Running batch bound")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o.engine.max_num_batched_tokens,
                  "Tokens per step (chunked prefill)")
      ->capture_default_str();
  cmd->add_option("--max-model-len", o.engine.max_model_len,
                  "Prompt + output bound (0: the profile's)")
      ->capture_default_str();
  cmd->add_flag("--no-enable-prefix-caching", flags->no_prefix_caching, "Disable the prefix cache");
  cmd->add_option("--num-host-blocks", o.engine.num_host_blocks,
                  "Host-memory KV tier, blocks (vLLM's CPU offloading; 0: off): evicted cached "
                  "blocks are copied there and loaded back for a later prefix hit; KV events "
                  "carry medium CPU for them")
      ->capture_default_str();
  cmd->add_option("--host-gbps", flags->host_gbps,
                  "Host -> GPU copy bandwidth of the host KV tier, GB/s (0: the profile's, "
                  "50 per GPU for the built-in H100 profiles)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--num-disk-blocks", o.engine.num_disk_blocks,
                  "Disk KV tier below host memory, blocks (0: off; as LMCache's local disk "
                  "backend): host copies dropped for room (GPU evictions, without a host tier) "
                  "are written there and loaded back for a later prefix hit, read into host "
                  "memory then copied in; KV events carry medium DISK for them")
      ->capture_default_str();
  cmd->add_option("--disk-gbps", flags->disk_gbps,
                  "Disk -> host read bandwidth of the disk KV tier, GB/s (0: the profile's, 5 "
                  "per GPU for the built-in H100 profiles, an assumed local NVMe drive)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--data-parallel-size", o.data_parallel_size,
                  "Data-parallel ranks behind the one HTTP address (vLLM's --data-parallel-size): "
                  "each its own KV cache and scheduler; a request's rank from its "
                  "X-data-parallel-rank header, else the least loaded (waiting x 4 + running); "
                  "rank r's KV events on the endpoints' ports + r; /metrics per rank "
                  "(engine=\"r\")")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  cmd->add_option("--kv-events-endpoint", o.kv_events_endpoint,
                  "ZeroMQ PUB endpoint for KV events; binds if it has *, ::, ipc:// or "
                  "inproc://, connects otherwise (vLLM's default: tcp://*:5557). Empty: off");
  cmd->add_option("--replay-endpoint", o.replay_endpoint,
                  "ZeroMQ ROUTER endpoint answering replay requests (e.g. tcp://*:5558)");
  cmd->add_option("--kv-events-topic", o.kv_events_topic, "Topic frame of every KV event message");
  cmd->add_option("--kv-events-format", flags->format,
                  "array (msgspec array_like, default) or map (newer vLLM: tagged maps)")
      ->capture_default_str();
  cmd->add_option("--kv-events-buffer-steps", o.kv_events_buffer_steps, "Batches kept for replay")
      ->capture_default_str();
  cmd->add_option("--startup", flags->startup,
                  "Startup phases before /health is 200: cold, caches-kept or none")
      ->capture_default_str();
  cmd->add_option("--time-scale", o.time_scale,
                  "Wall seconds per simulated second (0.01: 100x faster)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of startup draws, ids and fault injection")
      ->capture_default_str();
  cmd->add_option("--role", flags->role, "Disaggregated serving role: prefill, decode or both")
      ->capture_default_str();
  cmd->add_option("--rack", o.rack, "Rack of this engine (same rack: KV moves over NVLink)");
  cmd->add_option("--zone", o.zone, "Zone of this engine (reported in kv_transfer_params)");
  cmd->add_option("--advertise-host", o.advertise_host,
                  "remote_host in kv_transfer_params (default: --host)");
  cmd->add_option("--kv-bytes-per-token", o.kv_bytes_per_token,
                  "KV bytes per token for transfer times (0: from the profile)")
      ->capture_default_str();
  cmd->add_option("--nvlink-gbps", o.nvlink_gbytes_per_s, "Same-rack KV bandwidth, GB/s")
      ->capture_default_str();
  cmd->add_option("--network-gbps", o.network_gbytes_per_s, "Cross-rack KV bandwidth, GB/s")
      ->capture_default_str();
  cmd->add_option("--transfer-latency-ms", o.transfer_latency_ms, "Fixed KV transfer latency")
      ->capture_default_str();
  cmd->add_option("--fail-rate", o.fail_rate, "Fraction of requests answered with HTTP 500")
      ->capture_default_str();
  cmd->add_option("--abort-after-tokens", o.abort_after_tokens,
                  "Cut every response's connection after this many tokens (0: never)")
      ->capture_default_str();
  cmd->add_option("--stall-ms", o.stall_ms,
                  "Hold requests this many wall milliseconds before scheduling")
      ->capture_default_str();
  cmd->add_option("--stall-rate", o.stall_rate, "Fraction of requests that stall")
      ->capture_default_str();
  cmd->add_option("--tokenize-delay-ms", o.tokenize_delay_ms,
                  "Answer POST /tokenize this many wall milliseconds late (a slow engine)")
      ->capture_default_str();
  cmd->add_flag("--tokenize-fail", o.tokenize_fail,
                "Answer every POST /tokenize with HTTP 500 (a broken tokenizer endpoint)");
  cmd->add_option("--kv-events-drop-every", o.kv_events_drop_every,
                  "Withhold every Nth KV event batch from the PUB socket, as if lost on the "
                  "way (still numbered and kept for replay; 0: never)")
      ->capture_default_str();
  cmd->add_option("--default-max-tokens", o.default_max_tokens,
                  "Output length when a request gives no max_tokens")
      ->capture_default_str();
  cmd->add_option("--max-loras", o.max_loras,
                  "LoRA adapter slots (vLLM's --enable-lora --max-loras), also the most distinct "
                  "adapters in one batch: 0 turns LoRA off; adapters come from --lora-modules "
                  "or POST /v1/load_lora_adapter")
      ->capture_default_str();
  cmd->add_option("--lora-modules", flags->lora_modules,
                  "Adapters loaded at start, NAME=PATH (repeat the flag for several)");
  cmd->add_option("--lora-load-ms", o.lora_load_ms,
                  "Simulated milliseconds loading an adapter into a slot takes (POST "
                  "/v1/load_lora_adapter, or a request for an adapter evicted from its slot); "
                  "the engine's steps wait for it (scaled by --time-scale)")
      ->capture_default_str();
  cmd->add_option("--lora-step-cost", o.engine.lora_step_cost,
                  "Each distinct LoRA adapter beyond the first among a step's requests makes "
                  "the step this fraction longer (mixed-adapter kernels; an assumption to "
                  "calibrate, docs/engine-model.md)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--embedding-size", o.embedding_size,
                  "Values per embedding answered by POST /v1/embeddings")
      ->check(CLI::Range(1u, 65536u))
      ->capture_default_str();
  cmd->add_flag("--deprecated-gpu-cache-metric", o.deprecated_gpu_cache_metric,
                "Also export vllm:gpu_cache_usage_perc (older vLLM)");
  cmd->callback([flags] { env::set_exit_code(run(*flags)); });
}

}  // namespace kvgate::engine_server
