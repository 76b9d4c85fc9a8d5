#include "epp/epp_server.h"

#include <fmt/format.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "epp/health_service.h"

namespace kvgate::epp {
namespace {

constexpr const char* kHealthNames[] = {"", "liveness", "readiness",
                                        "envoy.service.ext_proc.v3.ExternalProcessor"};
// The names that follow readiness (the others, "liveness", are SERVING while it runs).
constexpr const char* kReadinessNames[] = {"", "readiness",
                                           "envoy.service.ext_proc.v3.ExternalProcessor"};
constexpr std::chrono::milliseconds kReadyPoll{100};

std::string listen_address(const std::string& address, uint16_t port) {
  return address.find(':') != std::string::npos ? fmt::format("[{}]:{}", address, port)
                                                : fmt::format("{}:{}", address, port);
}

void set_health(HealthService* health, bool ready) {
  if (!health) return;
  for (const char* name : kReadinessNames) health->set(name, ready);
}

void set_initial_health(HealthService& health, bool ready) {
  for (const char* name : kHealthNames) health.set(name, true);
  set_health(&health, ready);
}

// Our own health service (health_service.h) answers; gRPC's default one must not be
// added beside it, whatever the process-wide EnableDefaultHealthCheckService says.
void without_default_health(grpc::ServerBuilder& builder) {
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
}

class ExtProcService final : public pb::ExternalProcessor::Service {
 public:
  ExtProcService(Picker& picker, const ExchangeOptions& options)
      : picker_(picker), options_(options) {}

  grpc::Status Process(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<pb::ProcessingResponse, pb::ProcessingRequest>* stream) override {
    Exchange exchange(picker_, options_);
    const std::function<bool()> cancelled = [context] { return context->IsCancelled(); };
    pb::ProcessingRequest request;
    while (stream->Read(&request)) {
      Result<std::vector<pb::ProcessingResponse>> out = exchange.on_request(request, cancelled);
      if (!out) {
        spdlog::warn("epp: {}: {}", context->peer(), out.error());
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, out.error());
      }
      for (const pb::ProcessingResponse& r : *out) {
        if (!stream->Write(r)) return grpc::Status::OK;  // the data plane left
      }
    }
    return grpc::Status::OK;  // `exchange` settles a pick whose answer did not end
  }

 private:
  Picker& picker_;
  const ExchangeOptions options_;
};

}  // namespace

struct EppServer::Impl {
  std::unique_ptr<RequestClasses> classes;
  std::unique_ptr<ExtProcService> service;
  std::unique_ptr<HealthService> health;  // the main port's
  std::unique_ptr<grpc::Server> server;
  // The health port's server: the health service alone (any other method, ext_proc's
  // included, is unknown there: gRPC answers UNIMPLEMENTED).
  std::unique_ptr<HealthService> port_health;
  std::unique_ptr<grpc::Server> health_server;
  int port = 0;
  int health_port = 0;
  std::chrono::milliseconds grace{0};
  std::function<bool()> ready;
  std::thread poller;  // runs while `ready` is given, until stop()
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;  // under mu
  std::once_flag stopped;

  // Polls `ready`, and sets readiness on each change, until stop().
  void poll() {
    bool last = false;
    std::unique_lock lock(mu);
    while (!stopping) {
      lock.unlock();
      const bool now = ready();
      if (now != last) {
        set_health(health.get(), now);
        set_health(port_health.get(), now);
        spdlog::info("epp: readiness {}", now ? "SERVING" : "NOT_SERVING");
        last = now;
      }
      lock.lock();
      wake.wait_for(lock, kReadyPoll, [this] { return stopping; });
    }
  }
};

Result<std::unique_ptr<EppServer>> EppServer::start(const EppServerOptions& options,
                                                    Picker& picker) {
  auto impl = std::make_unique<Impl>();
  impl->classes = std::make_unique<RequestClasses>(options.objectives, options.max_fairness_ids);
  impl->service = std::make_unique<ExtProcService>(
      picker, ExchangeOptions{.max_body_bytes = options.max_body_bytes,
                              .classes = impl->classes.get(),
                              .fallbacks = options.fallbacks});
  impl->grace = options.grace;
  impl->ready = options.ready;
  impl->health = std::make_unique<HealthService>();
  const bool ready_now = !options.ready;
  set_initial_health(*impl->health, ready_now);
  grpc::ServerBuilder builder;
  without_default_health(builder);
  const std::string address = listen_address(options.address, options.port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls) {
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    pair.private_key = options.tls->key_pem;
    pair.cert_chain = options.tls->cert_pem;
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(address, credentials, &impl->port);
  builder.RegisterService(impl->service.get());
  builder.RegisterService(impl->health.get());
  // A BUFFERED data plane sends the whole body in one message.
  const size_t max_message = options.max_body_bytes + (1u << 20);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(max_message, static_cast<size_t>(INT32_MAX))));
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return Error(fmt::format("epp: cannot listen on {}{}", address,
                             options.tls ? " (or the TLS certificate and key were refused)" : ""));
  }
  if (options.health_port) {
    const std::string health_address = listen_address(options.address, *options.health_port);
    impl->port_health = std::make_unique<HealthService>();
    set_initial_health(*impl->port_health, ready_now);
    grpc::ServerBuilder health_builder;
    without_default_health(health_builder);
    health_builder.AddListeningPort(health_address, grpc::InsecureServerCredentials(),
                                    &impl->health_port);
    health_builder.RegisterService(impl->port_health.get());
    impl->health_server = health_builder.BuildAndStart();
    if (!impl->health_server || impl->health_port == 0) {
      impl->health->shutdown();
      impl->server->Shutdown(std::chrono::system_clock::now());
      impl->server->Wait();
      return Error(fmt::format("epp: cannot listen on {} (the health port)", health_address));
    }
  }
  if (impl->ready) {
    Impl* raw = impl.get();
    impl->poller = std::thread([raw] { raw->poll(); });
  }
  return std::unique_ptr<EppServer>(new EppServer(std::move(impl)));
}

EppServer::EppServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EppServer::~EppServer() { stop(); }

uint16_t EppServer::port() const { return static_cast<uint16_t>(impl_->port); }

std::optional<uint16_t> EppServer::health_port() const {
  if (!impl_->health_server) return std::nullopt;
  return static_cast<uint16_t>(impl_->health_port);
}

void EppServer::set_ready(bool ready) {
  set_health(impl_->health.get(), ready);
  set_health(impl_->port_health.get(), ready);
}

void EppServer::stop() {
  std::call_once(impl_->stopped, [this] {
    {
      std::lock_guard lock(impl_->mu);
      impl_->stopping = true;
    }
    impl_->wake.notify_all();
    if (impl_->poller.joinable()) impl_->poller.join();
    set_ready(false);
    // The streams first; the health port answers readiness NOT_SERVING meanwhile. Each
    // health service ends its watches (everything NOT_SERVING) before its server stops:
    // a watch would otherwise hold the server until the grace ran out.
    impl_->health->shutdown();
    impl_->server->Shutdown(std::chrono::system_clock::now() + impl_->grace);
    impl_->server->Wait();
    if (impl_->health_server) {
      impl_->port_health->shutdown();
      impl_->health_server->Shutdown(std::chrono::system_clock::now());
      impl_->health_server->Wait();
    }
  });
}

}  // namespace kvgate::epp
