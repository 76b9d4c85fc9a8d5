#include "epp/health_service.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

namespace kvgate::epp {

// One Check: waits for a call on its queue, answers from the table at once, and is
// deleted when the answer went (or failed). On its queue's thread alone.
class HealthService::CheckCall final : public QueueCall {
 public:
  CheckCall(HealthService& service, ::grpc::ServerCompletionQueue* cq, QueueCalls& calls)
      : QueueCall(calls), service_(service), cq_(cq), responder_(&context_) {
    op_started();
    service_.RequestCheck(&context_, &request_, &responder_, cq_, cq_, accept_tag_.tag());
  }

 private:
  // A call came (or, !ok, the server is ending: this one never had one).
  void on_accept(bool ok) {
    if (!ok) return;
    service_.await_check(cq_, calls());
    bool known = false;
    {
      std::lock_guard lock(service_.mu_);
      const auto it = service_.serving_.find(request_.service());
      if (it != service_.serving_.end()) {
        known = true;
        response_.set_status(it->second ? health_pb::HealthCheckResponse::SERVING
                                        : health_pb::HealthCheckResponse::NOT_SERVING);
      }
    }
    op_started();
    if (known) {
      responder_.Finish(response_, ::grpc::Status::OK, finish_tag_.tag());
    } else {
      responder_.FinishWithError(::grpc::Status(::grpc::StatusCode::NOT_FOUND, "unknown service"),
                                 finish_tag_.tag());
    }
  }

  void on_finish(bool /*ok*/) {}

  HealthService& service_;
  ::grpc::ServerCompletionQueue* const cq_;
  ::grpc::ServerContext context_;
  health_pb::HealthCheckRequest request_;
  health_pb::HealthCheckResponse response_;
  ::grpc::ServerAsyncResponseWriter<health_pb::HealthCheckResponse> responder_;
  CallTag<CheckCall> accept_tag_{this, &CheckCall::on_accept};
  CallTag<CheckCall> finish_tag_{this, &CheckCall::on_finish};
};

// One Watch. Its gRPC state is its queue thread's: every write and the finish start
// there. set() and shutdown() only wake that thread (wake_locked: an alarm already due on
// the watch's queue, the thread-safe way into another thread's Next()), and the watch,
// woken, reads the table and sends its status if it is not the one last sent. One write
// is out at a time; what changes meanwhile is read when it completes.
//
// Lifetime (QueueCall's count): the accept, the done notification (AsyncNotifyWhenDone:
// once for an accepted call, after its finish or its cancellation), the write or finish
// out, and the wake-up: one count from the accept while the watch is in the service's
// table (registered_) or its alarm is out, whichever ends last. An alarm's fire ends the
// count, and its reaction takes it again while the watch is registered; the watch leaves
// the table at its done notification, and ends the count then unless its alarm is out.
// So the watch outlives every alarm set on it, and set() sees only watches alive.
class HealthService::WatchCall final : public QueueCall {
 public:
  WatchCall(HealthService& service, ::grpc::ServerCompletionQueue* cq, QueueCalls& calls)
      : QueueCall(calls), service_(service), cq_(cq), writer_(&context_) {
    context_.AsyncNotifyWhenDone(done_tag_.tag());
    op_started();
    service_.RequestWatch(&context_, &request_, &writer_, cq_, cq_, accept_tag_.tag());
  }

  // Under the service's mu_, on any thread: the watch steps soon, on its queue's thread.
  // At most one alarm is out: it reads the table when it runs.
  void wake_locked() {
    if (alarm_out_) return;
    alarm_out_ = true;
    alarm_.emplace();
    alarm_->Set(cq_, std::chrono::system_clock::time_point(), alarm_tag_.tag());
  }

 private:
  // A call came (or, !ok, the server is ending: this one never had one).
  void on_accept(bool ok) {
    if (!ok) return;
    service_.await_watch(cq_, calls());
    op_started();  // the done notification: it comes for every accepted call
    op_started();  // the wake-up (the class's comment)
    {
      std::lock_guard lock(service_.mu_);
      registered_ = true;
      service_.watches_.insert(this);
    }
    step();
  }

  void on_write(bool ok) {
    writing_ = false;
    if (!ok) return finish();  // the client left
    step();                    // a change while writing goes next
  }

  void on_finish(bool /*ok*/) {}

  // The call ended: after its finish, or cancelled (the client left, or the server's
  // Shutdown deadline passed). A write out fails.
  void on_done(bool /*ok*/) {
    done_ = true;
    std::lock_guard lock(service_.mu_);
    registered_ = false;
    service_.watches_.erase(this);
    if (!alarm_out_) op_ended();  // the wake-up; else its alarm's fire ends it
  }

  // Woken by set() or shutdown().
  void on_alarm(bool /*ok*/) {
    {
      std::lock_guard lock(service_.mu_);
      alarm_out_ = false;
      if (!registered_) return;  // the call is over: the wake-up ended with this fire
    }
    op_started();  // the wake-up, still registered
    step();
  }

  // Sends the status when it is not the one last sent; else, after shutdown(), ends the
  // watch (OK). Nothing while a write or the finish is out, nor once the call is over.
  void step() {
    if (writing_ || finishing_ || done_) return;
    health_pb::HealthCheckResponse::ServingStatus now = health_pb::HealthCheckResponse::UNKNOWN;
    bool shut_down = false;
    {
      std::lock_guard lock(service_.mu_);
      now = service_.status_of(request_.service());
      shut_down = service_.shut_down_;
    }
    if (!sent_ || *sent_ != now) {
      sent_ = now;
      writing_ = true;
      response_.set_status(now);
      op_started();
      writer_.Write(response_, write_tag_.tag());
    } else if (shut_down) {
      finish();
    }
  }

  void finish() {
    if (finishing_ || done_) return;  // done_: cancelled, nobody to tell
    finishing_ = true;
    op_started();
    writer_.Finish(::grpc::Status::OK, finish_tag_.tag());
  }

  HealthService& service_;
  ::grpc::ServerCompletionQueue* const cq_;
  ::grpc::ServerContext context_;
  health_pb::HealthCheckRequest request_;
  health_pb::HealthCheckResponse response_;  // the write out, while writing_
  ::grpc::ServerAsyncWriter<health_pb::HealthCheckResponse> writer_;
  CallTag<WatchCall> accept_tag_{this, &WatchCall::on_accept};
  CallTag<WatchCall> write_tag_{this, &WatchCall::on_write};
  CallTag<WatchCall> finish_tag_{this, &WatchCall::on_finish};
  CallTag<WatchCall> done_tag_{this, &WatchCall::on_done};
  CallTag<WatchCall> alarm_tag_{this, &WatchCall::on_alarm};
  // Under the service's mu_.
  bool registered_ = false;  // in the service's watches_
  bool alarm_out_ = false;
  std::optional<::grpc::Alarm> alarm_;  // set by wake_locked, on set()'s thread
  // The queue's thread only.
  std::optional<health_pb::HealthCheckResponse::ServingStatus> sent_;
  bool writing_ = false;
  bool finishing_ = false;
  bool done_ = false;
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

void HealthService::serve_on(::grpc::ServerCompletionQueue* cq, QueueCalls& calls) {
  await_check(cq, calls);
  await_watch(cq, calls);
}

void HealthService::await_check(::grpc::ServerCompletionQueue* cq, QueueCalls& calls) {
  if (calls.admit()) new CheckCall(*this, cq, calls);  // deleted by its last tag's fire
}

void HealthService::await_watch(::grpc::ServerCompletionQueue* cq, QueueCalls& calls) {
  if (calls.admit()) new WatchCall(*this, cq, calls);  // deleted by its last tag's fire
}

void HealthService::notify_locked() {
  for (WatchCall* w : watches_) w->wake_locked();
}

health_pb::HealthCheckResponse::ServingStatus HealthService::status_of(
    const std::string& name) const {
  const auto it = serving_.find(name);
  if (it == serving_.end()) return health_pb::HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? health_pb::HealthCheckResponse::SERVING
                    : health_pb::HealthCheckResponse::NOT_SERVING;
}

}  // namespace kvgate::epp
