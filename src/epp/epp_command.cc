#include "epp/epp_command.h"

#include <absl/synchronization/mutex.h>
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "env/exit_code.h"
#include "env/file.h"
#include "env/system_clock.h"
#include "epp/epp_server.h"
#include "epp/gateway_picker.h"
#include "epp/self_signed.h"
#include "gateway/common/config.h"
#include "gateway/gateway.h"

namespace kvgate::epp {
namespace {

constexpr int kConfigError = 2;
constexpr int kStartError = 1;

struct EppOptions {
  std::string config;
  int port = -1;
};

int run(const EppOptions& o) {
  // gRPC's locks are Abseil's, and Debian's Abseil tracks every lock's order for deadlock
  // detection: a graph update on each acquisition, a large share of an exchange's cost.
  // Off, before gRPC starts a thread.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto config = gateway::load_gateway_config(o.config);
  if (!config) {
    fmt::print(stderr, "{}\n", config.error());
    return kConfigError;
  }
  const gateway::EppConfig where = config->epp.value_or(gateway::EppConfig{});
  EppServerOptions options;
  options.address = where.address;
  options.port = o.port >= 0 ? static_cast<uint16_t>(o.port) : where.port;
  options.max_body_bytes = static_cast<size_t>(config->limits.max_body_bytes);
  options.objectives = where.objectives;
  options.max_fairness_ids = where.max_fairness_ids;
  options.fallbacks = where.fallbacks;
  options.health_port = where.health_port;
  options.threads = where.threads;
  if (where.tls && where.tls->self_signed) {
    Result<PemPair> made = make_self_signed();
    if (!made) {
      fmt::print(stderr, "kvgate epp: {}\n", made.error());
      return kStartError;
    }
    options.tls = std::move(*made);
  } else if (where.tls) {
    // Checked with the config (loadable, the key the certificate's): read as they are now.
    Result<std::string> cert = env::read_file(where.tls->files.cert_file);
    Result<std::string> key = env::read_file(where.tls->files.key_file);
    if (!cert || !key) {
      fmt::print(stderr, "kvgate epp: epp.tls: {}\n", !cert ? cert.error() : key.error());
      return kConfigError;
    }
    options.tls = PemPair{std::move(*cert), std::move(*key)};
  }
  // The data plane carries the requests: no HTTP listener of the gateway's own (the
  // admin API still runs when configured).
  config->listeners.clear();

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::string admin_address = config->admin ? config->admin->address : "";
  const Clock& clock = env::system_clock();
  auto gw = gateway::Gateway::start(std::move(*config), {.clock = &clock});
  if (!gw) {
    fmt::print(stderr, "kvgate epp: {}\n", gw.error());
    return kStartError;
  }
  GatewayPicker picker(**gw, clock);
  // Ready as serve's /ready, and once every pool's discovery has taken its first list.
  options.ready = [g = gw->get()] { return !g->unready(/*discovered=*/true); };
  auto server = EppServer::start(options, picker);
  if (!server) {
    fmt::print(stderr, "kvgate epp: {}\n", server.error());
    (*gw)->drain();
    return kStartError;
  }
  fmt::print("kvgate epp: ext_proc gRPC on {}:{}{}\n", options.address, (*server)->port(),
             !options.tls                          ? ""
             : where.tls && where.tls->self_signed ? " (TLS, self-signed)"
                                                   : " (TLS)");
  if (auto health = (*server)->health_port()) {
    fmt::print("kvgate epp: gRPC health on {}:{}\n", options.address, *health);
  }
  if (auto admin_port = (*gw)->admin_port()) {
    fmt::print("kvgate epp: admin API on http://{}:{}\n", admin_address, *admin_port);
  }
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  fmt::print(stderr, "kvgate epp: {} received, stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  // The streams first (their picks settle on the running gateway), then the gateway.
  (*server)->stop();
  (*gw)->drain();
  fmt::print(stderr, "kvgate epp: stopped, exiting\n");
  return 0;
}

}  // namespace

void add_epp_command(CLI::App& app) {
  auto o = std::make_shared<EppOptions>();
  CLI::App* epp = app.add_subcommand(
      "epp",
      "Run the Endpoint Picker of the Gateway API Inference Extension: Envoy's External "
      "Processing gRPC service, routing with the pools of CONFIG (the serve config; "
      "docs/epp.md)");
  epp->add_option("config", o->config,
                  "Gateway config file (docs/gateway.md), its `epp:` section for the gRPC "
                  "address (default 0.0.0.0:9002)")
      ->required()
      ->check(CLI::ExistingFile);
  epp->add_option("--port", o->port, "Override epp.port (0: ephemeral, printed at start)")
      ->check(CLI::Range(0, 65535));
  epp->callback([o] { env::set_exit_code(run(*o)); });
}

}  // namespace kvgate::epp
