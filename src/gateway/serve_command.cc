#include "gateway/serve_command.h"

#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <memory>

#include "env/exit_code.h"
#include "env/system_clock.h"
#include "gateway/common/config.h"
#include "gateway/common/metrics.h"
#include "gateway/control/pool_discovery.h"
#include "gateway/data/keys.h"
#include "gateway/data/pool_runtime.h"
#include "gateway/gateway.h"

namespace kvgate::gateway {
namespace {

// Exit codes: one per kind of refusal, the same for `serve` and `serve --check`.
constexpr int kConfigError = 2;  // the config (or a file it names) is wrong: FILE:LINE:COL
constexpr int kStartError = 1;   // the config is right but the gateway cannot start with it

struct ServeOptions {
  std::string config;
  bool check = false;
  int port = -1;
};

int check(const GatewayConfig& config) {
  if (!config.keys_file.empty()) {
    auto keys = KeyStore::load(config.keys_file);
    if (!keys) {
      fmt::print(stderr, "{}\n", keys.error());
      return kConfigError;
    }
  }
  // Tokenizers and chat templates load here too, as they would at start.
  auto report = tokenize_report(config);
  if (!report) {
    fmt::print(stderr, "{}: {}\n", config.file, report.error());
    return kConfigError;
  }
  // Discovery sources are tried as Gateway::start would start them (a directory to watch,
  // credentials to read); a refusal reads and exits as serve's does.
  for (const PoolConfig& p : config.pools) {
    if (!p.discovery) continue;
    if (Status s = check_discovery(p.name, *p.discovery); !s) {
      fmt::print(stderr, "kvgate serve: {}\n", s.error());
      return kStartError;
    }
  }
  for (const std::string& line : *report) fmt::print("{}\n", line);
  size_t endpoints = 0;
  for (const PoolConfig& p : config.pools) endpoints += p.endpoints.size();
  fmt::print("{}: ok ({} listener(s), {} pool(s), {} endpoint(s), {} model(s))\n", config.file,
             config.listeners.size(), config.pools.size(), endpoints, config.models.size());
  return 0;
}

int run(const ServeOptions& o) {
  auto config = load_gateway_config(o.config);
  if (!config) {
    fmt::print(stderr, "{}\n", config.error());
    return kConfigError;
  }
  if (o.port >= 0 && !config->listeners.empty()) {
    config->listeners[0].port = static_cast<uint16_t>(o.port);
  }
  if (o.check) return check(*config);

  // Signals go to sigwait below, not to whichever thread happens to run.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> addresses;  // "https://127.0.0.1" (the port comes after start)
  for (const ListenerConfig& l : config->listeners) {
    addresses.push_back((l.tls ? "https://" : "http://") + l.address);
  }
  const std::string admin_address = config->admin ? config->admin->address : "";
  // `kvgate serve` is the gateway's owner: it runs on the real clock.
  auto gateway = Gateway::start(std::move(*config), {.clock = &env::system_clock()});
  if (!gateway) {
    fmt::print(stderr, "kvgate serve: {}\n", gateway.error());
    return kStartError;
  }
  auto ports = (*gateway)->ports();
  for (size_t i = 0; i < ports.size(); ++i) {
    fmt::print("kvgate serve: listening on {}:{}\n", addresses[i], ports[i]);
  }
  if (auto admin_port = (*gateway)->admin_port()) {
    fmt::print("kvgate serve: admin API on http://{}:{}\n", admin_address, *admin_port);
  }
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  fmt::print(stderr, "kvgate serve: {} received, draining\n",
             sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*gateway)->drain();
  fmt::print(stderr, "kvgate serve: drained, exiting\n");
  return 0;
}

}  // namespace

Result<std::vector<std::string>> tokenize_report(const GatewayConfig& config) {
  boost::asio::io_context io;
  GatewayMetrics metrics;
  std::vector<std::string> lines;
  for (const PoolConfig& p : config.pools) {
    auto pool =
        PoolRuntime::create(p, config.breaker, io.get_executor(), metrics, env::system_clock());
    if (!pool) return Error(pool.error());
    // Where the pool's routing ids come from, and why (pool_runtime.h, TokenizePlan).
    const TokenizePlan& plan = (*pool)->tokenize_plan();
    lines.push_back(fmt::format("pool {}: {}", p.name, plan.tokenizer));
    lines.push_back(fmt::format("pool {}: {}", p.name, plan.chat_template));
  }
  return lines;
}

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* serve = app.add_subcommand(
      "serve", "Run the OpenAI-compatible gateway in front of the pools in CONFIG (YAML)");
  serve->add_option("config", o->config, "Gateway config file (see docs/gateway.md)")
      ->required()
      ->check(CLI::ExistingFile);
  serve->add_flag("--check", o->check,
                  "Validate the config, keys file and tokenizers; print per pool where its "
                  "routing token ids come from (local fast or general path, engine fallback, "
                  "or none) and why; exit");
  serve->add_option("--port", o->port, "Override the first listener's port (0: ephemeral)")
      ->check(CLI::Range(0, 65535));
  serve->callback([o] { env::set_exit_code(run(*o)); });
}

}  // namespace kvgate::gateway
