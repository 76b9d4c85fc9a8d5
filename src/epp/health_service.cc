#include "epp/health_service.h"

#include <chrono>
#include <optional>

namespace kvgate::epp {
namespace {

// How often a Watch with nothing to send looks whether its client left.
constexpr std::chrono::milliseconds kWatchPoll{100};

}  // namespace

void HealthService::set(std::string_view name, bool serving) {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    auto it = serving_.find(name);
    if (it == serving_.end()) {
      serving_.emplace(std::string(name), serving);
    } else if (it->second == serving) {
      return;
    } else {
      it->second = serving;
    }
  }
  changed_.notify_all();
}

void HealthService::shutdown() {
  {
    std::lock_guard lock(mu_);
    shut_down_ = true;
    for (auto& [name, serving] : serving_) serving = false;
  }
  changed_.notify_all();
}

health_pb::HealthCheckResponse::ServingStatus HealthService::status_of(
    const std::string& name) const {
  const auto it = serving_.find(name);
  if (it == serving_.end()) return health_pb::HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? health_pb::HealthCheckResponse::SERVING
                    : health_pb::HealthCheckResponse::NOT_SERVING;
}

::grpc::Status HealthService::Check(::grpc::ServerContext* /*context*/,
                                    const health_pb::HealthCheckRequest* request,
                                    health_pb::HealthCheckResponse* response) {
  std::lock_guard lock(mu_);
  const auto it = serving_.find(request->service());
  if (it == serving_.end()) {
    return ::grpc::Status(::grpc::StatusCode::NOT_FOUND, "unknown service");
  }
  response->set_status(it->second ? health_pb::HealthCheckResponse::SERVING
                                  : health_pb::HealthCheckResponse::NOT_SERVING);
  return ::grpc::Status::OK;
}

::grpc::Status HealthService::Watch(::grpc::ServerContext* context,
                                    const health_pb::HealthCheckRequest* request,
                                    ::grpc::ServerWriter<health_pb::HealthCheckResponse>* writer) {
  const std::string& name = request->service();
  std::optional<health_pb::HealthCheckResponse::ServingStatus> sent;
  std::unique_lock lock(mu_);
  for (;;) {
    const health_pb::HealthCheckResponse::ServingStatus now = status_of(name);
    if (!sent || *sent != now) {
      lock.unlock();  // a write may wait for the client: not under the lock
      health_pb::HealthCheckResponse r;
      r.set_status(now);
      if (!writer->Write(r)) return ::grpc::Status::OK;  // the client left
      sent = now;
      lock.lock();
      continue;  // a change while writing is sent next
    }
    if (shut_down_) return ::grpc::Status::OK;
    if (context->IsCancelled()) return ::grpc::Status::CANCELLED;
    changed_.wait_for(lock, kWatchPoll);
  }
}

}  // namespace kvgate::epp
