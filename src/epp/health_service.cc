#include "epp/health_service.h"

#include <optional>
#include <string>
#include <utility>

namespace kvgate::epp {

// One Watch. Its state is the service's, under the service's mu_: set() and shutdown()
// step it from their threads, its reactions from gRPC's. gRPC runs no reaction inline
// from StartWrite or Finish (OnWriteDone and OnDone are scheduled), so both are started
// under mu_; OnDone takes mu_ before deleting the watcher, so a watcher some thread still
// steps under mu_ is alive.
class HealthService::Watcher final
    : public ::grpc::ServerWriteReactor<health_pb::HealthCheckResponse> {
 public:
  Watcher(HealthService& service, std::string name) : service_(service), name_(std::move(name)) {
    std::lock_guard lock(service_.mu_);
    service_.watchers_.insert(this);
    step_locked();
  }

  // Under mu_: sends the status when it is not the one last sent; else ends the watch at
  // shutdown (OK) or when the client left (CANCELLED). Nothing while a write is out.
  void step_locked() {
    if (writing_ || finished_) return;
    const health_pb::HealthCheckResponse::ServingStatus now = service_.status_of(name_);
    if (!sent_ || *sent_ != now) {
      sent_ = now;
      writing_ = true;
      response_.set_status(now);
      StartWrite(&response_);
    } else if (service_.shut_down_) {
      finish_locked(::grpc::Status::OK);
    } else if (cancelled_) {
      finish_locked(::grpc::Status::CANCELLED);
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(service_.mu_);
    writing_ = false;
    if (!ok) return finish_locked(::grpc::Status::OK);  // the client left
    step_locked();                                      // a change while writing is sent next
  }

  void OnCancel() override {
    std::lock_guard lock(service_.mu_);
    cancelled_ = true;
    step_locked();
  }

  void OnDone() override {
    {
      std::lock_guard lock(service_.mu_);
      service_.watchers_.erase(this);
    }
    delete this;
  }

 private:
  void finish_locked(::grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    Finish(std::move(status));
  }

  HealthService& service_;
  const std::string name_;
  // Under service_.mu_.
  health_pb::HealthCheckResponse response_;  // the write out, while writing_
  std::optional<health_pb::HealthCheckResponse::ServingStatus> sent_;
  bool writing_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
};

void HealthService::set(std::string_view name, bool serving) {
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
  notify_locked();
}

void HealthService::shutdown() {
  std::lock_guard lock(mu_);
  shut_down_ = true;
  for (auto& [name, serving] : serving_) serving = false;
  notify_locked();
}

void HealthService::notify_locked() {
  for (Watcher* w : watchers_) w->step_locked();
}

health_pb::HealthCheckResponse::ServingStatus HealthService::status_of(
    const std::string& name) const {
  const auto it = serving_.find(name);
  if (it == serving_.end()) return health_pb::HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? health_pb::HealthCheckResponse::SERVING
                    : health_pb::HealthCheckResponse::NOT_SERVING;
}

::grpc::ServerUnaryReactor* HealthService::Check(::grpc::CallbackServerContext* context,
                                                 const health_pb::HealthCheckRequest* request,
                                                 health_pb::HealthCheckResponse* response) {
  ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ::grpc::Status status = ::grpc::Status::OK;
  {
    std::lock_guard lock(mu_);
    const auto it = serving_.find(request->service());
    if (it == serving_.end()) {
      status = ::grpc::Status(::grpc::StatusCode::NOT_FOUND, "unknown service");
    } else {
      response->set_status(it->second ? health_pb::HealthCheckResponse::SERVING
                                      : health_pb::HealthCheckResponse::NOT_SERVING);
    }
  }
  reactor->Finish(std::move(status));
  return reactor;
}

::grpc::ServerWriteReactor<health_pb::HealthCheckResponse>* HealthService::Watch(
    ::grpc::CallbackServerContext* /*context*/, const health_pb::HealthCheckRequest* request) {
  return new Watcher(*this, request->service());
}

}  // namespace kvgate::epp
