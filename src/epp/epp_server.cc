#include "epp/epp_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"

namespace kvgate::epp {
namespace {

constexpr const char* kHealthNames[] = {"", "liveness", "readiness",
                                        "envoy.service.ext_proc.v3.ExternalProcessor"};

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
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::chrono::milliseconds grace{0};
  std::once_flag stopped;
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
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const std::string address = options.address.find(':') != std::string::npos
                                  ? fmt::format("[{}]:{}", options.address, options.port)
                                  : fmt::format("{}:{}", options.address, options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(impl->service.get());
  // A BUFFERED data plane sends the whole body in one message.
  const size_t max_message = options.max_body_bytes + (1u << 20);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(max_message, static_cast<size_t>(INT32_MAX))));
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return Error(fmt::format("epp: cannot listen on {}", address));
  }
  if (grpc::HealthCheckServiceInterface* health = impl->server->GetHealthCheckService()) {
    for (const char* name : kHealthNames) health->SetServingStatus(name, true);
  }
  return std::unique_ptr<EppServer>(new EppServer(std::move(impl)));
}

EppServer::EppServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EppServer::~EppServer() { stop(); }

uint16_t EppServer::port() const { return static_cast<uint16_t>(impl_->port); }

void EppServer::set_ready(bool ready) {
  if (grpc::HealthCheckServiceInterface* health = impl_->server->GetHealthCheckService()) {
    health->SetServingStatus("readiness", ready);
    health->SetServingStatus("envoy.service.ext_proc.v3.ExternalProcessor", ready);
  }
}

void EppServer::stop() {
  std::call_once(impl_->stopped, [this] {
    set_ready(false);
    impl_->server->Shutdown(std::chrono::system_clock::now() + impl_->grace);
    impl_->server->Wait();
  });
}

}  // namespace kvgate::epp
