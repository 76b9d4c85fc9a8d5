#include "epp/epp_server.h"

#include <fmt/format.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
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

// One ext_proc stream, on gRPC's callback API: no thread waits for it. One operation at
// a time, in the order a blocking server would run them: a read; when the request is whole,
// its pick (Picker::start_pick: the gateway decides on this thread when the pick waits for
// nothing, and the decision comes back before start_pick returns; else on its own
// threads, and the decision comes back there); the responses, written one by one (one
// write out at a time, the others queued); then the next read. So no two of the reactions
// below run at once, OnCancel aside, and the Exchange needs no lock. No reaction blocks: the
// Exchange's work is in memory, and the pick is not waited for.
class ProcessStream final
    : public grpc::ServerBidiReactor<pb::ProcessingRequest, pb::ProcessingResponse> {
 public:
  ProcessStream(grpc::CallbackServerContext* context, Picker& picker,
                const ExchangeOptions& options)
      : context_(context), picker_(picker), exchange_(picker, options) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return finish(grpc::Status::OK);  // the data plane's side ended (or it left)
    Result<Exchange::Step> step = exchange_.on_message(request_);
    if (!step) {
      spdlog::warn("epp: {}: {}", context_->peer(), step.error());
      return finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, step.error()));
    }
    for (pb::ProcessingResponse& r : step->responses) queue_.push_back(std::move(r));
    if (step->pick) return pick(std::move(*step->pick));
    write_next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return finish(grpc::Status::OK);  // the data plane left
    queue_.pop_front();
    write_next();
  }

  // The data plane left (or the server's grace ran out): a pick under way is cancelled
  // (it then decides soon, with an answer); a read or write out fails.
  void OnCancel() override {
    std::function<void()> cancel;
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
      cancel = cancel_;
    }
    if (cancel) cancel();
  }

  void OnDone() override { delete this; }

 private:
  // The next queued response, or, when all went, the next message.
  void write_next() {
    if (queue_.empty()) {
      StartRead(&request_);
    } else {
      StartWrite(&queue_.front());
    }
  }

  // Starts the pick of the whole request. Its decision may come on any thread, even
  // before start_pick returns: then it is taken here, after, so that this reactor is not
  // finished (and deleted) on another thread while start_pick is still on this one.
  void pick(gateway::ExternalRequest request) {
    {
      std::lock_guard lock(mu_);
      starting_ = true;
    }
    std::function<void()> cancel = picker_.start_pick(
        std::move(request), [this](gateway::ExternalPick p) { decided(std::move(p)); });
    std::optional<gateway::ExternalPick> early;
    bool cancel_now = false;
    {
      std::lock_guard lock(mu_);
      starting_ = false;
      if (early_) {
        early = std::move(early_);
        early_.reset();
      } else {
        cancel_ = cancel;
        cancel_now = cancelled_;  // the data plane left before the cancel could be sent
      }
    }
    if (early) return routed(std::move(*early));
    // `cancel` is this frame's: the decision may meanwhile have finished the reactor.
    if (cancel_now) cancel();
  }

  // The pick's decision, on the picker's thread.
  void decided(gateway::ExternalPick p) {
    {
      std::lock_guard lock(mu_);
      cancel_ = nullptr;
      if (starting_) {
        early_ = std::move(p);
        return;
      }
    }
    routed(std::move(p));
  }

  // The pick's responses go first, then the rest of the message's.
  void routed(gateway::ExternalPick p) {
    std::vector<pb::ProcessingResponse> out = exchange_.on_pick(std::move(p));
    queue_.insert(queue_.begin(), std::make_move_iterator(out.begin()),
                  std::make_move_iterator(out.end()));
    write_next();
  }

  void finish(grpc::Status status) {
    exchange_.end();  // settles a pick whose answer did not end, as a client that left
    Finish(std::move(status));
  }

  grpc::CallbackServerContext* const context_;
  Picker& picker_;
  Exchange exchange_;
  pb::ProcessingRequest request_;             // the read out
  std::deque<pb::ProcessingResponse> queue_;  // to write; the front is the write out
  std::mutex mu_;           // the pick's hand-over between this reactor and the picker's thread
  bool starting_ = false;   // under mu_: start_pick has not returned
  bool cancelled_ = false;  // under mu_
  std::function<void()> cancel_;                // under mu_: the pick's, while it runs
  std::optional<gateway::ExternalPick> early_;  // under mu_: decided during start_pick
};

class ExtProcService final : public pb::ExternalProcessor::CallbackService {
 public:
  ExtProcService(Picker& picker, const ExchangeOptions& options)
      : picker_(picker), options_(options) {}

  grpc::ServerBidiReactor<pb::ProcessingRequest, pb::ProcessingResponse>* Process(
      grpc::CallbackServerContext* context) override {
    return new ProcessStream(context, picker_, options_);
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
