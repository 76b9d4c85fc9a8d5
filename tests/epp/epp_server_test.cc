// The Endpoint Picker's gRPC server (epp/epp_server.h) on loopback, with a fake Picker:
// the health service on the main port and on epp.health_port (Check and Watch, keyed by
// readiness; on the server's own queues, beside ext_proc), and the health port serving
// nothing else (ext_proc there is a method gRPC
// does not know: UNIMPLEMENTED), ext_proc streams whose pick comes later on another thread
// or is cancelled, and several threads (completion queues).
#include "epp/epp_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace kvgate::epp {
namespace epp_server_test {

namespace health_pb = ::grpc::health::v1;
namespace core_pb = ::envoy::config::core::v3;

// Picks 10.0.0.7:8000 for every request.
struct FakePicker final : Picker {
  gateway::ExternalPick pick(gateway::ExternalRequest, const std::function<bool()>&) override {
    gateway::ExternalPick p;
    auto e = std::make_shared<gateway::EndpointAddress>();
    e->host = "10.0.0.7";
    e->port = 8000;
    p.destination = gateway::destination_of(*e);
    p.endpoint = std::move(e);
    return p;
  }
  void done(gateway::ExternalPick, gateway::ExternalOutcome) override {}
  Nanos now() const override { return 0; }
};

// Decides as the gateway does (Gateway::pick_external): later, on a thread of its own,
// when the test says (decide()), or soon with a 503 when cancelled. The server must not
// wait in pick().
struct LaterPicker final : Picker {
  std::mutex mu;
  std::condition_variable changed;
  std::function<void(gateway::ExternalPick)> pending;  // under mu: the pick under way
  int started = 0;                                     // under mu
  int cancels = 0;                                     // under mu
  int settled = 0;                                     // under mu
  std::vector<std::thread> threads;                    // under mu: the decisions'

  ~LaterPicker() override {
    std::vector<std::thread> joining;
    {
      std::lock_guard lock(mu);
      joining = std::move(threads);
    }
    for (std::thread& t : joining) t.join();
  }

  gateway::ExternalPick pick(gateway::ExternalRequest, const std::function<bool()>&) override {
    ADD_FAILURE() << "the server waited for a pick";
    return {};
  }
  std::function<void()> start_pick(gateway::ExternalRequest,
                                   std::function<void(gateway::ExternalPick)> decided) override {
    std::lock_guard lock(mu);
    pending = std::move(decided);
    ++started;
    changed.notify_all();
    return [this] {
      std::lock_guard lock(mu);
      ++cancels;
      gateway::ExternalPick refused;
      refused.answer = io::HttpResponse{503, "application/json", {}, "{}", {}};
      decide_locked(std::move(refused));
    };
  }
  void done(gateway::ExternalPick, gateway::ExternalOutcome) override {
    std::lock_guard lock(mu);
    ++settled;
    changed.notify_all();
  }
  Nanos now() const override { return 0; }

  // Waits until `what` holds (under mu), up to 10 s.
  bool wait_for(const std::function<bool()>& what) {
    std::unique_lock lock(mu);
    return changed.wait_for(lock, std::chrono::seconds(10), what);
  }
  // The pick under way decided: 10.0.0.7:8000, on a thread of its own.
  void decide() {
    std::lock_guard lock(mu);
    gateway::ExternalPick p;
    auto e = std::make_shared<gateway::EndpointAddress>();
    e->host = "10.0.0.7";
    e->port = 8000;
    p.destination = gateway::destination_of(*e);
    p.endpoint = std::move(e);
    decide_locked(std::move(p));
  }
  void decide_locked(gateway::ExternalPick p) {
    if (!pending) return;  // decided already
    threads.emplace_back([d = std::move(pending), p = std::move(p)]() mutable { d(std::move(p)); });
    pending = nullptr;
  }
};

std::shared_ptr<::grpc::Channel> channel_to(uint16_t port) {
  return ::grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               ::grpc::InsecureChannelCredentials());
}

void with_deadline(::grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

// Check of `name`: the status, or nullopt with the gRPC error code in `code`.
std::optional<health_pb::HealthCheckResponse::ServingStatus> check(
    const std::shared_ptr<::grpc::Channel>& channel, const std::string& name,
    ::grpc::StatusCode* code = nullptr) {
  auto stub = health_pb::Health::NewStub(channel);
  ::grpc::ClientContext context;
  with_deadline(context);
  health_pb::HealthCheckRequest request;
  request.set_service(name);
  health_pb::HealthCheckResponse response;
  const ::grpc::Status s = stub->Check(&context, request, &response);
  if (code) *code = s.error_code();
  if (!s.ok()) return std::nullopt;
  return response.status();
}

// A request's headers that end its stream (no body), with `method` as `:method` unless null.
pb::ProcessingRequest headers_only(const char* method) {
  pb::ProcessingRequest r;
  if (method != nullptr) {
    core_pb::HeaderValue* h = r.mutable_request_headers()->mutable_headers()->add_headers();
    h->set_key(":method");
    h->set_raw_value(method);
  }
  r.mutable_request_headers()->set_end_of_stream(true);
  return r;
}

// One ext_proc stream of a GET's headers (end of stream): the call's final status, and
// whether a response came.
::grpc::Status process_get(const std::shared_ptr<::grpc::Channel>& channel, bool& answered) {
  auto stub = pb::ExternalProcessor::NewStub(channel);
  ::grpc::ClientContext context;
  with_deadline(context);
  auto stream = stub->Process(&context);
  stream->Write(headers_only("GET"));
  stream->WritesDone();
  pb::ProcessingResponse response;
  answered = false;
  while (stream->Read(&response)) answered = true;
  return stream->Finish();
}

constexpr auto kServing = health_pb::HealthCheckResponse::SERVING;
constexpr auto kNotServing = health_pb::HealthCheckResponse::NOT_SERVING;

std::unique_ptr<EppServer> start(Picker& picker, bool health_port, uint32_t threads = 1) {
  EppServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.grace = std::chrono::milliseconds(100);
  if (health_port) o.health_port = 0;
  o.threads = threads;
  auto server = EppServer::start(o, picker);
  EXPECT_TRUE(server) << server.error();
  if (!server) return nullptr;
  return std::move(*server);
}

TEST(EppServer, HealthPortAnswersCheckByReadinessAndLivenessStays) {
  FakePicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/true);
  ASSERT_TRUE(server);
  ASSERT_TRUE(server->health_port().has_value());
  auto health = channel_to(*server->health_port());
  auto ext = channel_to(server->port());
  for (const auto& channel : {health, ext}) {
    for (const char* name :
         {"", "liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"}) {
      EXPECT_EQ(check(channel, name), kServing) << name;
    }
    ::grpc::StatusCode code = ::grpc::StatusCode::OK;
    EXPECT_FALSE(check(channel, "no.such.Service", &code).has_value());
    EXPECT_EQ(code, ::grpc::StatusCode::NOT_FOUND);
  }
  server->set_ready(false);
  for (const auto& channel : {health, ext}) {
    EXPECT_EQ(check(channel, ""), kNotServing);
    EXPECT_EQ(check(channel, "readiness"), kNotServing);
    EXPECT_EQ(check(channel, "envoy.service.ext_proc.v3.ExternalProcessor"), kNotServing);
    EXPECT_EQ(check(channel, "liveness"), kServing);
  }
  server->set_ready(true);
  EXPECT_EQ(check(health, "readiness"), kServing);
  server->stop();
}

TEST(EppServer, ExtProcOnTheHealthPortIsAMethodGrpcDoesNotKnow) {
  FakePicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/true);
  ASSERT_TRUE(server);
  bool answered = true;
  const ::grpc::Status s = process_get(channel_to(*server->health_port()), answered);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_FALSE(answered);
  // The main port picks.
  const ::grpc::Status ok = process_get(channel_to(server->port()), answered);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_TRUE(answered);
  server->stop();
}

TEST(EppServer, WatchSendsTheStatusThenEachChangeAndEndsAtStop) {
  FakePicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/true);
  ASSERT_TRUE(server);
  auto stub = health_pb::Health::NewStub(channel_to(*server->health_port()));
  ::grpc::ClientContext context;
  with_deadline(context);
  health_pb::HealthCheckRequest request;
  request.set_service("readiness");
  auto watch = stub->Watch(&context, request);
  health_pb::HealthCheckResponse r;
  ASSERT_TRUE(watch->Read(&r));
  EXPECT_EQ(r.status(), kServing);
  server->set_ready(false);
  ASSERT_TRUE(watch->Read(&r));
  EXPECT_EQ(r.status(), kNotServing);
  server->set_ready(true);
  ASSERT_TRUE(watch->Read(&r));
  EXPECT_EQ(r.status(), kServing);
  // stop(): NOT_SERVING, then the watch ends (it does not hold the server).
  const auto before = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  while (watch->Read(&r)) {
    EXPECT_EQ(r.status(), kNotServing);
  }
  (void)watch->Finish();

  // An unknown name: SERVICE_UNKNOWN, not an error.
  std::unique_ptr<EppServer> again = start(picker, /*health_port=*/false);
  ASSERT_TRUE(again);
  auto stub2 = health_pb::Health::NewStub(channel_to(again->port()));
  ::grpc::ClientContext c2;
  with_deadline(c2);
  request.set_service("no.such.Service");
  auto unknown = stub2->Watch(&c2, request);
  ASSERT_TRUE(unknown->Read(&r));
  EXPECT_EQ(r.status(), health_pb::HealthCheckResponse::SERVICE_UNKNOWN);
  c2.TryCancel();
  while (unknown->Read(&r)) {
  }
  (void)unknown->Finish();
  again->stop();
}

// A Watch of `name` on `channel`, read on the test's thread.
struct Watch {
  Watch(const std::shared_ptr<::grpc::Channel>& channel, const std::string& name)
      : stub(health_pb::Health::NewStub(channel)) {
    with_deadline(context);
    health_pb::HealthCheckRequest request;
    request.set_service(name);
    reader = stub->Watch(&context, request);
  }
  // The next status, or nullopt at the stream's end.
  std::optional<health_pb::HealthCheckResponse::ServingStatus> next() {
    health_pb::HealthCheckResponse r;
    if (!reader->Read(&r)) return std::nullopt;
    return r.status();
  }
  // The statuses left, up to the stream's end.
  std::vector<health_pb::HealthCheckResponse::ServingStatus> rest() {
    std::vector<health_pb::HealthCheckResponse::ServingStatus> out;
    while (auto s = next()) out.push_back(*s);
    return out;
  }

  std::unique_ptr<health_pb::Health::Stub> stub;
  ::grpc::ClientContext context;
  std::unique_ptr<::grpc::ClientReader<health_pb::HealthCheckResponse>> reader;
};

// The health service runs on the server's own queues on both ports (two threads on the
// main port): a Watch on each sends the status, then each change; changes made faster
// than they are sent are coalesced (never the same status twice in a row); stop() ends
// both watches with NOT_SERVING.
TEST(EppServer, WatchOnBothPortsFollowsReadinessAndEndsAtStop) {
  FakePicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/true, /*threads=*/2);
  ASSERT_TRUE(server);
  ASSERT_TRUE(server->health_port().has_value());
  Watch on_main(channel_to(server->port()), "readiness");
  Watch on_port(channel_to(*server->health_port()), "readiness");
  for (Watch* w : {&on_main, &on_port}) {
    EXPECT_EQ(w->next(), kServing);
  }
  server->set_ready(false);
  for (Watch* w : {&on_main, &on_port}) {
    EXPECT_EQ(w->next(), kNotServing);
  }
  server->set_ready(true);
  for (Watch* w : {&on_main, &on_port}) {
    EXPECT_EQ(w->next(), kServing);
  }
  // Quick changes, from this thread while the queues' threads write.
  for (int i = 0; i < 50; ++i) server->set_ready(i % 2 == 1);
  // Ext_proc beside them on the same queues.
  bool answered = false;
  EXPECT_TRUE(process_get(channel_to(server->port()), answered).ok());
  EXPECT_TRUE(answered);
  EXPECT_EQ(check(channel_to(server->port()), "readiness"), kServing);
  EXPECT_EQ(check(channel_to(*server->health_port()), "readiness"), kServing);

  const auto before = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  for (Watch* w : {&on_main, &on_port}) {
    const std::vector<health_pb::HealthCheckResponse::ServingStatus> rest = w->rest();
    for (size_t i = 1; i < rest.size(); ++i) {
      EXPECT_NE(rest[i], rest[i - 1]) << i;
    }
    // Ended by the server (OK): NOT_SERVING last. The main port's watch may instead be
    // cancelled by its short grace (100 ms) on a slow machine; the health port's has a
    // second.
    const ::grpc::Status s = w->reader->Finish();
    if (w == &on_port) {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    if (s.ok()) {
      ASSERT_FALSE(rest.empty());
      EXPECT_EQ(rest.back(), kNotServing);
    }
  }
}

// A client that leaves its Watch: the watch ends on the server (later changes wake
// nothing of it), the service still answers, and stop() does not wait for it.
TEST(EppServer, AWatchTheClientLeavesEnds) {
  FakePicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/true);
  ASSERT_TRUE(server);
  ASSERT_TRUE(server->health_port().has_value());
  for (const uint16_t p : {server->port(), *server->health_port()}) {
    Watch w(channel_to(p), "readiness");
    EXPECT_EQ(w.next(), kServing);
    w.context.TryCancel();
    (void)w.rest();
    EXPECT_EQ(w.reader->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
    server->set_ready(false);
    server->set_ready(true);
    EXPECT_EQ(check(channel_to(p), "readiness"), kServing);
  }
  // A new watch after them is served as the first was.
  Watch again(channel_to(server->port()), "liveness");
  EXPECT_EQ(again.next(), kServing);
  const auto before = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  (void)again.rest();
  (void)again.reader->Finish();
}

// The pick is decided on the picker's thread, after the handler returned: the answer
// still comes on the stream, and the stream goes on to the response path.
TEST(EppServer, APickDecidedLaterOnAnotherThreadIsAnsweredOnTheStream) {
  LaterPicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/false);
  ASSERT_TRUE(server);
  auto stub = pb::ExternalProcessor::NewStub(channel_to(server->port()));
  ::grpc::ClientContext context;
  with_deadline(context);
  auto stream = stub->Process(&context);
  ASSERT_TRUE(stream->Write(headers_only("GET")));
  ASSERT_TRUE(picker.wait_for([&] { return picker.started == 1; }));
  picker.decide();
  pb::ProcessingResponse response;
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_request_headers());
  bool named = false;
  for (const auto& o : response.request_headers().response().header_mutation().set_headers()) {
    if (o.header().key() == "x-gateway-destination-endpoint") {
      EXPECT_EQ(o.header().raw_value(), "10.0.0.7:8000");
      named = true;
    }
  }
  EXPECT_TRUE(named) << response.DebugString();
  // The response path: its headers pass, and the stream's end settles the pick.
  pb::ProcessingRequest back;
  back.mutable_response_headers()->set_end_of_stream(true);
  ASSERT_TRUE(stream->Write(back));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_TRUE(response.has_response_headers());
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  const ::grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(picker.wait_for([&] { return picker.settled == 1; }));
  server->stop();
}

// The data plane leaves while the pick is under way: the pick is cancelled (the gateway
// then answers it), the stream ends, and stop() does not wait for it.
TEST(EppServer, AClientThatLeavesDuringThePickCancelsIt) {
  LaterPicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/false);
  ASSERT_TRUE(server);
  auto stub = pb::ExternalProcessor::NewStub(channel_to(server->port()));
  ::grpc::ClientContext context;
  with_deadline(context);
  auto stream = stub->Process(&context);
  ASSERT_TRUE(stream->Write(headers_only(nullptr)));
  ASSERT_TRUE(picker.wait_for([&] { return picker.started == 1; }));
  context.TryCancel();
  EXPECT_TRUE(picker.wait_for([&] { return picker.cancels == 1; }));
  pb::ProcessingResponse response;
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  const auto before = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  std::lock_guard lock(picker.mu);
  EXPECT_EQ(picker.settled, 0);  // a refusal: nothing to settle
}

// Several threads (epp.threads), each with its own completion queue: concurrent streams
// are all answered, whichever thread accepted them, and stop() ends them all.
TEST(EppServer, SeveralThreadsAnswerConcurrentStreams) {
  FakePicker picker;
  std::unique_ptr<EppServer> server = start(picker, /*health_port=*/false, /*threads=*/2);
  ASSERT_TRUE(server);
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&answered, port = server->port()] {
      auto channel = channel_to(port);
      for (int j = 0; j < 5; ++j) {
        bool got = false;
        if (process_get(channel, got).ok() && got) ++answered;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered.load(), 20);
  // A pick decided later, on another thread, with two queues: handed back to its own.
  LaterPicker later;
  std::unique_ptr<EppServer> again = start(later, /*health_port=*/false, /*threads=*/2);
  ASSERT_TRUE(again);
  auto stub = pb::ExternalProcessor::NewStub(channel_to(again->port()));
  ::grpc::ClientContext context;
  with_deadline(context);
  auto stream = stub->Process(&context);
  ASSERT_TRUE(stream->Write(headers_only(nullptr)));
  ASSERT_TRUE(later.wait_for([&] { return later.started == 1; }));
  later.decide();
  pb::ProcessingResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_TRUE(response.has_request_headers()) << response.DebugString();
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  const ::grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  again->stop();
  server->stop();
}

}  // namespace epp_server_test
}  // namespace kvgate::epp
