// The Kubernetes source against a test API server that speaks the real wire format
// (support/fake_kube_api.h): LIST then WATCH, a pod going NotReady and terminating, a
// dropped watch, 410 Gone, a missed DELETED that only the periodic LIST repairs, a
// service-account token rotated on disk, and a Service's EndpointSlices through the same
// (an endpoint not ready, terminating, moved between slices; a slice deleted).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/discovery/reconciler.h"
#include "discovery/kubernetes_source.h"
#include "support/eventually.h"
#include "support/fake_kube_api.h"
#include "support/recording_sink.h"

namespace kvgate::testing {
namespace {

using discovery::KubernetesSourceConfig;
using std::chrono::milliseconds;

class KubernetesSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.error().empty()) << api_.error();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("k8s." + std::to_string(::getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    write_token("token-1");
    std::ofstream(dir_ / "kubeconfig") << test_kubeconfig(api_.url());
  }
  void TearDown() override {
    if (source_) source_->stop();
    std::filesystem::remove_all(dir_);
  }
  void write_token(const std::string& t) {
    std::ofstream(dir_ / "token.tmp") << t << "\n";
    std::filesystem::rename(dir_ / "token.tmp", dir_ / "token");
  }
  // `slices`: the EndpointSlices of Service vllm instead of the pods selected by app=vllm.
  // `data_parallel_size`: the source's ranks behind every endpoint.
  void start(milliseconds resync = milliseconds(60'000), bool slices = false,
             uint32_t data_parallel_size = 1) {
    KubernetesSourceConfig c;
    c.data_parallel_size = data_parallel_size;
    if (slices) {
      c.mode = KubernetesSourceConfig::Mode::kEndpointSlices;
      c.service = "vllm";
    } else {
      c.selector = "app=vllm";
    }
    c.kubeconfig = (dir_ / "kubeconfig").string();
    c.resync = resync;
    c.backoff = milliseconds(50);
    c.timeout = milliseconds(2000);
    source_ = std::make_unique<discovery::KubernetesSource>(c, sink_);
    Status s = source_->start();
    ASSERT_TRUE(s) << s.error();
  }
  // Waits for the source's thread to open its n-th watch on the fake API.
  bool wait_watches(int n) {
    return eventually([&] { return api_.watches() >= n; }, std::chrono::seconds(2));
  }

  FakeKubeApi api_{"token-1"};
  std::filesystem::path dir_;
  RecordingSink sink_;
  std::unique_ptr<discovery::KubernetesSource> source_;
};

TEST_F(KubernetesSourceTest, ListThenWatchFollowsPodsThroughReadinessAndTermination) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true,
                       {{"kvgate.io/role", "prefill"}, {"topology.kubernetes.io/zone", "z1"}},
                       {{"kvgate.io/kv-events-port", "5557"}}));
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, true));
  api_.upsert(make_pod("vllm-c", "127.0.0.3", 8001, false));  // not Ready yet
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.2:8001"}));
  auto first = sink_.reports().back();
  EXPECT_FALSE(first.resync);
  for (const auto& e : first.set) {
    if (e.spec.url != "http://127.0.0.1:8001") continue;
    EXPECT_EQ(e.spec.role, Role::kPrefill);
    EXPECT_EQ(e.spec.zone, "z1");
    ASSERT_TRUE(e.kv_events);
    EXPECT_EQ(e.kv_events->publisher, "tcp://127.0.0.1:5557");
  }
  ASSERT_TRUE(wait_watches(1));
  const std::string q = api_.watch_queries().at(0);
  EXPECT_NE(q.find("watch=1"), std::string::npos) << q;
  EXPECT_NE(q.find("allowWatchBookmarks=true"), std::string::npos) << q;
  EXPECT_NE(q.find("resourceVersion=1003"), std::string::npos) << q;  // the LIST's

  // c becomes Ready; b goes NotReady; a terminates (deletionTimestamp), then is deleted.
  api_.upsert(make_pod("vllm-c", "127.0.0.3", 8001, true));
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.1:8001", "http://127.0.0.2:8001", "http://127.0.0.3:8001"}));
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, false));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.3:8001"}));
  auto terminating = make_pod("vllm-a", "127.0.0.1", 8001, true);
  terminating["metadata"].as_object()["deletionTimestamp"] = "2026-12-01T10:05:00Z";
  terminating["metadata"].as_object()["deletionGracePeriodSeconds"] = 30;
  api_.upsert(terminating);
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.3:8001"}));
  api_.remove("vllm-a");
  api_.remove("vllm-b");
  ASSERT_TRUE(sink_.wait([](const auto& r, const auto&) { return r.back().set.size() == 1; }));
  EXPECT_EQ(api_.lists(), 1);
  EXPECT_TRUE(sink_.errors().empty()) << sink_.errors().front();
}

TEST_F(KubernetesSourceTest, ADroppedWatchListsAgainAndBookmarksMoveTheResourceVersion) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true));
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001"}));
  ASSERT_TRUE(wait_watches(1));
  api_.bookmark();  // rv 1002
  // A clean end (the server's timeout): watch again from the bookmark, no LIST. A fixed
  // wait for the source's thread to read the bookmark: the source shows nothing of it.
  std::this_thread::sleep_for(milliseconds(50));
  api_.end_watches();
  ASSERT_TRUE(wait_watches(2));
  EXPECT_NE(api_.watch_queries().at(1).find("resourceVersion=1002"), std::string::npos)
      << api_.watch_queries().at(1);
  EXPECT_EQ(api_.lists(), 1);
  // A broken connection: counted as an error, then LIST again; what changed meanwhile
  // arrives.
  api_.drop_watches();
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, true));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.2:8001"}));
  ASSERT_TRUE(wait_watches(3));
  EXPECT_GE(api_.lists(), 2);
  EXPECT_FALSE(sink_.errors().empty());
}

TEST_F(KubernetesSourceTest, GoneAsAnErrorEventOrAnHttp410ListsAgain) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true));
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001"}));
  ASSERT_TRUE(wait_watches(1));
  // History compacted past what the client holds, and a change it never saw: its next
  // WATCH gets an ERROR event with a 410 Status, and the LIST after it brings c.
  api_.upsert_silently(make_pod("vllm-c", "127.0.0.3", 8001, true));
  api_.compact();
  api_.end_watches();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.3:8001"}));
  EXPECT_EQ(api_.lists(), 2);
  // Again with the answer an HTTP 410.
  ASSERT_TRUE(wait_watches(3));
  api_.upsert_silently(make_pod("vllm-d", "127.0.0.4", 8001, true));
  api_.compact(/*http_410=*/true);
  api_.end_watches();
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.1:8001", "http://127.0.0.3:8001", "http://127.0.0.4:8001"}));
  EXPECT_EQ(api_.lists(), 3);
  EXPECT_TRUE(sink_.errors().empty()) << sink_.errors().front();  // 410 is routine
}

TEST_F(KubernetesSourceTest, AMissedDeletedIsRepairedByThePeriodicListAndCounted) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true));
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, true));
  start(/*resync=*/milliseconds(1500));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.2:8001"}));
  ASSERT_TRUE(wait_watches(1));
  api_.remove_silently("vllm-b");  // the watch never hears of it
  // A negative check: no report drops vllm-b within 300 ms (before the periodic list).
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(RecordingSink::ready_urls(sink_.reports().back()).size(), 2u);  // still believed
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001"}, std::chrono::seconds(5)));
  EXPECT_TRUE(sink_.reports().back().resync);
  // What the reconciler makes of these reports: one resync difference, one endpoint gone.
  discovery::Reconciler r({.grace = 0});
  const size_t k8s = r.add_source("k8s");
  std::vector<discovery::Action> actions;
  for (const auto& rep : sink_.reports()) {
    auto a = r.report(k8s, 0, rep.set, rep.resync);
    actions.insert(actions.end(), a.begin(), a.end());
  }
  EXPECT_EQ(r.stats(k8s).resync_differences, 1u);
  ASSERT_FALSE(actions.empty());
  EXPECT_EQ(actions.back().kind, discovery::Action::Kind::kRemove);
  EXPECT_EQ(actions.back().endpoint.spec.url, "http://127.0.0.2:8001");
}

TEST_F(KubernetesSourceTest, ARotatedTokenIsUsedFromTheNextRequest) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true));
  start();
  ASSERT_TRUE(wait_watches(1));
  EXPECT_EQ(api_.last_token(), "token-1");
  // The kubelet rotates the projected token: the file changes, the old one is refused.
  write_token("token-2");
  api_.set_token("token-2");
  api_.end_watches();
  ASSERT_TRUE(wait_watches(2));
  EXPECT_EQ(api_.last_token(), "token-2");
  EXPECT_EQ(api_.unauthorized(), 0);
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, true));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.2:8001"}));
  // A token the server does not take: 401s counted as errors, the set kept.
  api_.set_token("token-3");
  api_.drop_watches();
  ASSERT_TRUE(sink_.wait([](const auto&, const auto& e) {
    for (const auto& m : e) {
      if (m.find("401") != std::string::npos) return true;
    }
    return false;
  }));
  write_token("token-3");
  api_.upsert(make_pod("vllm-c", "127.0.0.3", 8001, true));
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.1:8001", "http://127.0.0.2:8001", "http://127.0.0.3:8001"}));
}

TEST_F(KubernetesSourceTest, EndpointSlicesOfAServiceThroughReadinessTerminationAndDeletion) {
  // Service vllm in two slices (the controller splits a Service's endpoints), and a slice
  // of another Service the label selector must leave out.
  api_.upsert(make_endpoint_slice(
      "vllm-7x2kq", {{{"127.0.0.1"}, "vllm-a"}, {{"127.0.0.2"}, "vllm-b", true, true, false, "z2"}},
      8001, "vllm", 5557));
  api_.upsert(make_endpoint_slice("vllm-p9d4m", {{{"127.0.0.3"}, "vllm-c"}}, 8001));
  api_.upsert(make_endpoint_slice("other-h5t8z", {{{"127.0.0.9"}, "other-0"}}, 8001, "other"));
  start(milliseconds(60'000), /*slices=*/true);
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.1:8001", "http://127.0.0.2:8001", "http://127.0.0.3:8001"}));
  const RecordingSink::Report listed = sink_.reports().back();
  for (const auto& e : listed.set) {
    if (e.spec.url == "http://127.0.0.2:8001") {
      EXPECT_EQ(e.spec.zone, "z2");
      ASSERT_TRUE(e.kv_events);
      EXPECT_EQ(e.kv_events->publisher, "tcp://127.0.0.2:5557");
    }
    if (e.spec.url == "http://127.0.0.3:8001") {
      EXPECT_FALSE(e.kv_events);  // its slice has no kv-events port
    }
  }
  ASSERT_TRUE(wait_watches(1));
  const std::string q = api_.watch_queries().at(0);
  EXPECT_TRUE(
      q.starts_with("/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices?"
                    "labelSelector=kubernetes.io%2Fservice-name%3Dvllm&"))
      << q;
  EXPECT_NE(q.find("watch=1"), std::string::npos) << q;
  EXPECT_NE(q.find("allowWatchBookmarks=true"), std::string::npos) << q;
  EXPECT_NE(q.find("resourceVersion=1003"), std::string::npos) << q;  // the LIST's

  // b fails its readiness probe: ready and serving false.
  api_.upsert(make_endpoint_slice(
      "vllm-7x2kq", {{{"127.0.0.1"}, "vllm-a"}, {{"127.0.0.2"}, "vllm-b", false, false, false}},
      8001, "vllm", 5557));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.3:8001"}));
  // a's pod is deleted: terminating, still serving through its grace period. It drains.
  api_.upsert(make_endpoint_slice("vllm-7x2kq",
                                  {{{"127.0.0.1"}, "vllm-a", false, true, true},
                                   {{"127.0.0.2"}, "vllm-b", false, false, false}},
                                  8001, "vllm", 5557));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.3:8001"}));
  // a is gone from its slice, b is ready again, and the controller moves c into this slice
  // (added here before it leaves the other): c is never absent from a report.
  const size_t before_move = sink_.reports().size();
  api_.upsert(make_endpoint_slice(
      "vllm-7x2kq", {{{"127.0.0.2"}, "vllm-b"}, {{"127.0.0.3"}, "vllm-c"}}, 8001, "vllm", 5557));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.2:8001", "http://127.0.0.3:8001"}));
  // The slice it left, emptied, then deleted: one report each, b and c stay.
  const size_t before_delete = sink_.reports().size();
  api_.upsert(make_endpoint_slice("vllm-p9d4m", {}, 8001));
  api_.remove("vllm-p9d4m", "EndpointSlice");
  ASSERT_TRUE(
      sink_.wait([&](const auto& r, const auto&) { return r.size() >= before_delete + 2; }));
  EXPECT_EQ(RecordingSink::ready_urls(sink_.reports().back()),
            (std::set<std::string>{"http://127.0.0.2:8001", "http://127.0.0.3:8001"}));
  // One pod with two addresses (fungible: the first is used): one endpoint.
  api_.upsert(make_endpoint_slice("vllm-w3j6n", {{{"127.0.0.4", "127.0.0.5"}, "vllm-d"}}, 8001));
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.2:8001", "http://127.0.0.3:8001", "http://127.0.0.4:8001"}));
  EXPECT_EQ(sink_.reports().back().set.size(), 3u);
  const std::vector<RecordingSink::Report> reports = sink_.reports();
  for (size_t i = before_move; i < reports.size(); ++i) {
    EXPECT_TRUE(RecordingSink::ready_urls(reports[i]).contains("http://127.0.0.3:8001"))
        << "report " << i;
  }
  // The slice deleted: its endpoint leaves.
  api_.remove("vllm-w3j6n", "EndpointSlice");
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.2:8001", "http://127.0.0.3:8001"}));
  // Everything came through one LIST and its WATCH, nothing from the other Service.
  EXPECT_EQ(api_.lists(), 1);
  for (const auto& r : sink_.reports()) {
    for (const auto& e : r.set) EXPECT_NE(e.spec.url, "http://127.0.0.9:8001");
  }
  EXPECT_TRUE(sink_.errors().empty()) << sink_.errors().front();

  // A broken watch: LIST again; a slice deleted meanwhile (its DELETED never seen) is gone.
  api_.remove_silently("vllm-7x2kq", "EndpointSlice");
  api_.upsert_silently(make_endpoint_slice("vllm-k8r1s", {{{"127.0.0.6"}, "vllm-e"}}, 8001));
  api_.drop_watches();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.6:8001"}));
  EXPECT_EQ(api_.lists(), 2);
}

TEST_F(KubernetesSourceTest, DataParallelRanksFromTheSourceAndThePodsAnnotation) {
  // The source says two ranks; b's annotation says one (a plain endpoint), c's is not a
  // size: c is left out and the error names it, until its annotation is fixed.
  api_.upsert(
      make_pod("vllm-a", "127.0.0.1", 8001, true, {}, {{"kvgate.io/kv-events-port", "5557"}}));
  api_.upsert(
      make_pod("vllm-b", "127.0.0.2", 8001, true, {}, {{"kvgate.io/data-parallel-size", "1"}}));
  api_.upsert(
      make_pod("vllm-c", "127.0.0.3", 8001, true, {}, {{"kvgate.io/data-parallel-size", "two"}}));
  start(milliseconds(60'000), /*slices=*/false, /*data_parallel_size=*/2);
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.1:8001#dp0", "http://127.0.0.1:8001#dp1", "http://127.0.0.2:8001"}));
  const auto reports = sink_.reports();  // a copy: the loop reads its last one
  for (const auto& e : reports.back().set) {
    if (!e.spec.url.starts_with("http://127.0.0.1:8001#dp")) continue;
    ASSERT_TRUE(e.kv_events) << e.spec.url;
    EXPECT_EQ(e.kv_events->publisher,
              e.spec.url.ends_with("#dp1") ? "tcp://127.0.0.1:5558" : "tcp://127.0.0.1:5557");
  }
  const std::vector<std::string> errors = sink_.errors();
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.front().find("pod vllm-c: annotation kvgate.io/data-parallel-size: expected "
                                "a number of data-parallel ranks, 1 to 256, got 'two'"),
            std::string::npos)
      << errors.front();

  // c fixed (three ranks), then a deleted: its ranks leave together.
  ASSERT_TRUE(wait_watches(1));
  api_.upsert(
      make_pod("vllm-c", "127.0.0.3", 8001, true, {}, {{"kvgate.io/data-parallel-size", "3"}}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001#dp0", "http://127.0.0.1:8001#dp1",
                                   "http://127.0.0.2:8001", "http://127.0.0.3:8001#dp0",
                                   "http://127.0.0.3:8001#dp1", "http://127.0.0.3:8001#dp2"}));
  api_.remove("vllm-a");
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.2:8001", "http://127.0.0.3:8001#dp0",
                                   "http://127.0.0.3:8001#dp1", "http://127.0.0.3:8001#dp2"}));
  EXPECT_EQ(api_.lists(), 1);
}

TEST_F(KubernetesSourceTest, NoCredentialsIsAClearErrorAtStart) {
  KubernetesSourceConfig c;
  c.selector = "app=vllm";
  c.token_file = (dir_ / "none").string();
  discovery::KubernetesSource s(c, sink_);
  Status st = s.start();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("kubeconfig"), std::string::npos) << st.error();
}

}  // namespace
}  // namespace kvgate::testing
