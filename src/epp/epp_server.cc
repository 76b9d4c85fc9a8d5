#include "epp/epp_server.h"

#include <fmt/format.h>
#include <grpcpp/alarm.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
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
#include "epp/queue_call.h"

namespace kvgate::epp {
namespace {

constexpr const char* kHealthNames[] = {"", "liveness", "readiness",
                                        "envoy.service.ext_proc.v3.ExternalProcessor"};
// The names that follow readiness (the others, "liveness", are SERVING while it runs).
constexpr const char* kReadinessNames[] = {"", "readiness",
                                           "envoy.service.ext_proc.v3.ExternalProcessor"};
constexpr std::chrono::milliseconds kReadyPoll{100};
// stop(): how long the health port's watches may take to send NOT_SERVING and end.
constexpr std::chrono::milliseconds kHealthGrace{1000};

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

// What the ext_proc streams of every queue of the main port share.
struct ExtProcShared {
  pb::ExternalProcessor::AsyncService& service;
  Picker& picker;
  const ExchangeOptions& options;
};

// One completion queue of a server and the thread that polls it (Next()): gRPC's work for
// the queue's calls (reading and writing their messages) runs on that thread as it
// polls, and so does every reaction of the calls it accepted, whatever their service
// (queue_call.h: each tag is a QueueTag). On the main port a queue serves ext_proc and
// the health service; on the health port, the health service alone. One call of each
// method always waits on the queue for a new one (RequestProcess, RequestCheck,
// RequestWatch), so a new call is accepted on the thread that will serve it.
class ServerQueue {
 public:
  // `ext_proc`, `health`: the services served on the queue (null: not this one), which
  // must outlive it; `calls` counts the calls of the queue's server.
  ServerQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq, QueueCalls& calls,
              const ExtProcShared* ext_proc, HealthService* health)
      : cq_(std::move(cq)), calls_(calls), ext_proc_(ext_proc), health_(health) {}
  ServerQueue(const ServerQueue&) = delete;
  ServerQueue& operator=(const ServerQueue&) = delete;

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  // After every call of the server is gone (QueueCalls::wait_none): nothing can start an
  // operation on the queue any more. Drains what is left in it and joins the thread.
  void shut_down() {
    cq_->Shutdown();
    if (thread_.joinable()) thread_.join();
  }

  // A new ext_proc stream waiting for a call on this queue; none once the server's end
  // began.
  void accept_stream();

  grpc::ServerCompletionQueue* cq() { return cq_.get(); }
  QueueCalls& calls() { return calls_; }
  const ExtProcShared& ext_proc() const { return *ext_proc_; }

 private:
  void run();

  const std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  QueueCalls& calls_;
  const ExtProcShared* const ext_proc_;
  HealthService* const health_;
  std::thread thread_;
};

// One ext_proc stream, on gRPC's async API: every reaction runs on its queue's thread, so
// its state needs no lock, the pick's hand-over aside. One operation at a time, in the
// order a blocking server would run them: a read; when the request is whole, its pick
// (Picker::start_pick: the gateway decides on this thread when the pick waits for nothing,
// and the decision comes back before start_pick returns; else on its own threads); the
// responses, written one by one (one write out at a time, the others queued); then the
// next read. No reaction blocks: the Exchange's work is in memory, the pick is not waited
// for.
//
// A decision that comes back on another thread must not touch the stream's gRPC state
// there: it is left in the stream's mailbox (under mu_), and the stream's alarm, set to a
// deadline already past on the stream's queue, wakes the queue's thread (grpc::Alarm::Set
// is the thread-safe way into another thread's Next()), which takes it from the mailbox.
//
// Lifetime (QueueCall's count, queue_call.h): what is out: the accept, the read, write or
// finish, the done notification (AsyncNotifyWhenDone, delivered once for an accepted
// call, after its end or its cancellation) and the pick (its decision, inline or through
// the alarm). The stream is deleted, on its queue's thread, once none is out.
class ProcessStream final : public QueueCall {
 public:
  explicit ProcessStream(ServerQueue& queue)
      : QueueCall(queue.calls()),
        queue_(queue),
        ext_proc_(queue.ext_proc()),
        exchange_(ext_proc_.picker, ext_proc_.options),
        responder_(&context_) {
    context_.AsyncNotifyWhenDone(done_tag_.tag());
    op_started();
    ext_proc_.service.RequestProcess(&context_, &responder_, queue_.cq(), queue_.cq(),
                                     accept_tag_.tag());
  }

 private:
  // A call came (or, !ok, the server is ending: this stream never had one).
  void on_accept(bool ok) {
    if (!ok) return;
    queue_.accept_stream();
    op_started();  // the done notification: it comes for every accepted call
    read();
  }

  void on_read(bool ok) {
    if (!ok) return finish(grpc::Status::OK);  // the data plane's side ended (or it left)
    Result<Exchange::Step> step = exchange_.on_message(request_);
    if (!step) {
      spdlog::warn("epp: {}: {}", context_.peer(), step.error());
      return finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, step.error()));
    }
    for (pb::ProcessingResponse& r : step->responses) out_.push_back(std::move(r));
    if (step->pick) return pick(std::move(*step->pick));
    write_next();
  }

  void on_write(bool ok) {
    if (!ok) return finish(grpc::Status::OK);  // the data plane left
    out_.pop_front();
    write_next();
  }

  void on_finish(bool /*ok*/) {}

  // The call ended: after its status went, or cancelled (the data plane left, or the
  // server's grace ran out). A pick under way is cancelled (it then decides soon, with
  // an answer); a read or write out fails.
  void on_done(bool /*ok*/) {
    if (!context_.IsCancelled()) return;
    cancelled_ = true;
    cancel_pick();
  }

  // The decision, handed over by decided() from another thread.
  void on_alarm(bool /*ok*/) {
    std::optional<gateway::ExternalPick> p;
    {
      std::lock_guard lock(mu_);
      p = std::move(mailbox_);
      mailbox_.reset();
    }
    cancel_ = nullptr;
    if (p) routed(std::move(*p));
  }

  void read() {
    op_started();
    responder_.Read(&request_, read_tag_.tag());
  }

  // The next queued response, or, when all went, the next message.
  void write_next() {
    if (out_.empty()) return read();
    op_started();
    responder_.Write(out_.front(), write_tag_.tag());
  }

  // Starts the pick of the whole request. Its decision may come on any thread, even
  // before start_pick returns: then it is taken here, after, on this thread.
  void pick(gateway::ExternalRequest request) {
    op_started();  // the pick: its decision, inline (below) or through the alarm
    {
      std::lock_guard lock(mu_);
      starting_ = true;
    }
    std::function<void()> cancel = ext_proc_.picker.start_pick(
        std::move(request), [this](gateway::ExternalPick p) { decided(std::move(p)); });
    std::optional<gateway::ExternalPick> early;
    {
      std::lock_guard lock(mu_);
      starting_ = false;
      if (mailbox_) {
        early = std::move(mailbox_);
        mailbox_.reset();
      }
    }
    if (early) {
      op_ended();
      return routed(std::move(*early));
    }
    cancel_ = std::move(cancel);
    // The call was cancelled before the pick started (its done notification came first).
    if (cancelled_) cancel_pick();
  }

  // The pick out, if any, is cancelled: its decision then comes soon (through the alarm,
  // even when the cancel decides at once, on this thread).
  void cancel_pick() {
    if (!cancel_) return;
    std::function<void()> cancel = std::move(cancel_);
    cancel_ = nullptr;
    cancel();
  }

  // The pick's decision, on the picker's thread (this one, when inline).
  void decided(gateway::ExternalPick p) {
    {
      std::lock_guard lock(mu_);
      mailbox_ = std::move(p);
      if (starting_) return;  // pick() takes it when start_pick returns
    }
    // The stream stays while its pick is out (its count): the alarm is the last thing of
    // it touched here, and gRPC's Set touches nothing of it once its tag is queued.
    alarm_.emplace();
    alarm_->Set(queue_.cq(), std::chrono::system_clock::time_point(), alarm_tag_.tag());
  }

  // The pick's responses go first, then the rest of the message's.
  void routed(gateway::ExternalPick p) {
    std::vector<pb::ProcessingResponse> out = exchange_.on_pick(std::move(p));
    if (cancelled_) return finish(grpc::Status::CANCELLED);  // nobody to answer
    out_.insert(out_.begin(), std::make_move_iterator(out.begin()),
                std::make_move_iterator(out.end()));
    write_next();
  }

  void finish(grpc::Status status) {
    exchange_.end();  // settles a pick whose answer did not end, as a client that left
    op_started();
    responder_.Finish(status, finish_tag_.tag());
  }

  ServerQueue& queue_;
  const ExtProcShared& ext_proc_;
  Exchange exchange_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<pb::ProcessingResponse, pb::ProcessingRequest> responder_;
  CallTag<ProcessStream> accept_tag_{this, &ProcessStream::on_accept};
  CallTag<ProcessStream> read_tag_{this, &ProcessStream::on_read};
  CallTag<ProcessStream> write_tag_{this, &ProcessStream::on_write};
  CallTag<ProcessStream> finish_tag_{this, &ProcessStream::on_finish};
  CallTag<ProcessStream> done_tag_{this, &ProcessStream::on_done};
  CallTag<ProcessStream> alarm_tag_{this, &ProcessStream::on_alarm};
  pb::ProcessingRequest request_;           // the read out
  std::deque<pb::ProcessingResponse> out_;  // to write; the front is the write out
  bool cancelled_ = false;                  // the done notification said cancelled
  std::function<void()> cancel_;            // the pick's, while it is out
  // Set by decided() on the picker's thread; the queue's thread reads it after its tag.
  std::optional<grpc::Alarm> alarm_;
  std::mutex mu_;                                 // the pick's hand-over
  bool starting_ = false;                         // under mu_: start_pick has not returned
  std::optional<gateway::ExternalPick> mailbox_;  // under mu_: the decision, not yet taken
};

void ServerQueue::accept_stream() {
  if (calls_.admit()) new ProcessStream(*this);  // deleted by its last tag's fire
}

void ServerQueue::run() {
  if (ext_proc_) accept_stream();
  if (health_) health_->serve_on(cq_.get(), calls_);
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) static_cast<const QueueTag*>(tag)->fire(ok);
}

}  // namespace

struct EppServer::Impl {
  std::unique_ptr<RequestClasses> classes;
  ExchangeOptions exchange;  // every stream's
  pb::ExternalProcessor::AsyncService service;
  std::unique_ptr<ExtProcShared> ext_proc;
  std::unique_ptr<HealthService> health;  // the main port's
  QueueCalls calls;                       // the main port's: ext_proc streams, health calls
  // Declared before the server: destroyed after it (shut down and drained first).
  std::vector<std::unique_ptr<ServerQueue>> queues;
  std::unique_ptr<grpc::Server> server;
  // The health port's server: the health service alone (any other method, ext_proc's
  // included, is unknown there: gRPC answers UNIMPLEMENTED), on a queue of its own (a
  // queue belongs to the server it was added to) and one thread.
  std::unique_ptr<HealthService> port_health;
  QueueCalls port_calls;
  std::unique_ptr<ServerQueue> port_queue;
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

  // The main port's end: no new call; the streams in flight until `deadline`, then
  // cancelled (a pick under way is cancelled, and still decides). Returns when every call
  // has ended (deleted) and the queues' threads are gone: only then are the queues shut
  // down, so no call can start an operation on a queue that is. The health service's
  // watches must have been ended first (HealthService::shutdown).
  void end_main(std::chrono::system_clock::time_point deadline) {
    calls.stop_admitting();
    server->Shutdown(deadline);  // fails the calls waited for; cancels the rest at deadline
    server->Wait();
    calls.wait_none();
    for (const std::unique_ptr<ServerQueue>& q : queues) q->shut_down();
  }

  // The health port's end, as the main port's: its watches send NOT_SERVING and end, with
  // kHealthGrace to do so (they end at once, unless a client does not take its messages).
  void end_health_port() {
    port_health->shutdown();
    port_calls.stop_admitting();
    health_server->Shutdown(std::chrono::system_clock::now() + kHealthGrace);
    health_server->Wait();
    port_calls.wait_none();
    port_queue->shut_down();
  }

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
  impl->exchange = ExchangeOptions{.max_body_bytes = options.max_body_bytes,
                                   .classes = impl->classes.get(),
                                   .fallbacks = options.fallbacks};
  impl->grace = options.grace;
  impl->ready = options.ready;
  impl->ext_proc.reset(new ExtProcShared{impl->service, picker, impl->exchange});
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
  builder.RegisterService(&impl->service);
  builder.RegisterService(impl->health.get());
  // The queues, each polled by a thread of ours, serve both services: no callback
  // service is registered, so gRPC starts no callback threads.
  const uint32_t threads = std::clamp<uint32_t>(options.threads, 1, 64);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  for (uint32_t i = 0; i < threads; ++i) cqs.push_back(builder.AddCompletionQueue());
  // A BUFFERED data plane sends the whole body in one message.
  const size_t max_message = options.max_body_bytes + (1u << 20);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(max_message, static_cast<size_t>(INT32_MAX))));
  impl->server = builder.BuildAndStart();
  if (impl->server) {
    for (std::unique_ptr<grpc::ServerCompletionQueue>& cq : cqs) {
      impl->queues.push_back(std::make_unique<ServerQueue>(
          std::move(cq), impl->calls, impl->ext_proc.get(), impl->health.get()));
    }
    for (const std::unique_ptr<ServerQueue>& q : impl->queues) q->start();
  }
  if (!impl->server || impl->port == 0) {
    if (impl->server) {
      impl->health->shutdown();
      impl->end_main(std::chrono::system_clock::now());
    }
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
    std::unique_ptr<grpc::ServerCompletionQueue> health_cq = health_builder.AddCompletionQueue();
    impl->health_server = health_builder.BuildAndStart();
    if (impl->health_server) {
      impl->port_queue = std::make_unique<ServerQueue>(std::move(health_cq), impl->port_calls,
                                                       nullptr, impl->port_health.get());
      impl->port_queue->start();
    }
    if (!impl->health_server || impl->health_port == 0) {
      if (impl->health_server) impl->end_health_port();
      impl->health->shutdown();
      impl->end_main(std::chrono::system_clock::now());
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
    impl_->end_main(std::chrono::system_clock::now() + impl_->grace);
    if (impl_->health_server) impl_->end_health_port();
  });
}

}  // namespace kvgate::epp
