// The Kubernetes source following an InferencePool (inference.networking.k8s.io/v1)
// against the test API server (support/fake_kube_api.h), over real HTTP: the pool's
// selector and targetPorts pick the pods and their ports; editing either re-selects them;
// a missing, deleted or malformed pool is reported, and the pods of the last good spec
// stay followed; watches that end or expire are resumed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "discovery/kubernetes_source.h"
#include "support/eventually.h"
#include "support/fake_kube_api.h"
#include "support/recording_sink.h"

namespace kvgate::testing::discovery_inference_pool_test {

using discovery::KubernetesSourceConfig;
using std::chrono::milliseconds;

constexpr const char* kPoolsPath =
    "/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools";

class InferencePoolSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.error().empty()) << api_.error();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("k8s-pool." + std::to_string(::getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "token") << "token-1\n";
    std::ofstream(dir_ / "kubeconfig") << test_kubeconfig(api_.url());
  }
  void TearDown() override {
    if (source_) source_->stop();
    std::filesystem::remove_all(dir_);
  }
  void start() {
    KubernetesSourceConfig c;
    c.inference_pool = "vllm-pool";
    c.kubeconfig = (dir_ / "kubeconfig").string();
    c.resync = milliseconds(60'000);
    c.backoff = milliseconds(50);
    c.timeout = milliseconds(2000);
    source_ = std::make_unique<discovery::KubernetesSource>(c, sink_);
    Status s = source_->start();
    ASSERT_TRUE(s) << s.error();
  }
  // The WATCH queries of the pods / of the pool, in order.
  std::vector<std::string> watches_of(bool pool) {
    std::vector<std::string> out;
    for (const std::string& q : api_.watch_queries()) {
      if (q.starts_with(kPoolsPath) == pool) out.push_back(q);
    }
    return out;
  }
  bool wait_watches(bool pool, size_t n) {
    return eventually([&] { return watches_of(pool).size() >= n; }, std::chrono::seconds(5));
  }
  // Waits for an error that contains `text`.
  bool wait_error(const std::string& text) {
    return sink_.wait([&](const auto&, const std::vector<std::string>& errors) {
      return std::any_of(errors.begin(), errors.end(),
                         [&](const std::string& e) { return e.find(text) != std::string::npos; });
    });
  }
  std::string all_errors() {
    std::string out;
    for (const std::string& e : sink_.errors()) out += e + "\n";
    return out;
  }

  FakeKubeApi api_{"token-1"};
  std::filesystem::path dir_;
  RecordingSink sink_;
  std::unique_ptr<discovery::KubernetesSource> source_;
};

TEST_F(InferencePoolSourceTest, ThePoolsSelectorAndTargetPortsPickTheEndpointsAndEditsReselect) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true, {{"tier", "decode"}}));
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, true, {{"tier", "prefill"}}));
  auto other = make_pod("other", "127.0.0.9", 8001, true);  // another app's pod
  other["metadata"].as_object()["labels"].as_object()["app"] = "sglang";
  api_.upsert(other);
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {8001}));
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.2:8001"}))
      << all_errors();
  EXPECT_EQ(api_.gets(), 1);
  ASSERT_TRUE(wait_watches(/*pool=*/true, 1));
  const std::string pool_watch = watches_of(true).at(0);
  EXPECT_TRUE(pool_watch.starts_with(std::string(kPoolsPath) +
                                     "?fieldSelector=metadata.name%3Dvllm-pool&watch=1"))
      << pool_watch;
  EXPECT_NE(pool_watch.find("resourceVersion=1004"), std::string::npos) << pool_watch;
  ASSERT_TRUE(wait_watches(/*pool=*/false, 1));
  EXPECT_TRUE(watches_of(false).at(0).starts_with(
      "/api/v1/namespaces/llm/pods?labelSelector=app%3Dvllm&watch=1"))
      << watches_of(false).at(0);

  // A second target port: every pod is an endpoint at each.
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {8001, 8002}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.1:8002",
                                   "http://127.0.0.2:8001", "http://127.0.0.2:8002"}));
  // A narrower selector: the pods it leaves out go.
  api_.upsert(
      make_inference_pool("vllm-pool", {{"app", "vllm"}, {"tier", "decode"}}, {8001, 8002}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.1:8002"}));
  // The pods are watched with the new selector: a new pod it matches joins, one it does
  // not match stays out.
  api_.upsert(make_pod("vllm-c", "127.0.0.3", 8001, true, {{"tier", "decode"}}));
  api_.upsert(make_pod("vllm-d", "127.0.0.4", 8001, true, {{"tier", "prefill"}}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.1:8002",
                                   "http://127.0.0.3:8001", "http://127.0.0.3:8002"}));
  const std::vector<std::string> pods = watches_of(false);
  EXPECT_NE(pods.back().find("labelSelector=app%3Dvllm%2Ctier%3Ddecode&"), std::string::npos)
      << pods.back();
  // Back to one port.
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}, {"tier", "decode"}}, {8002}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8002", "http://127.0.0.3:8002"}));
  // A change of the pool that leaves its spec as it was re-selects nothing.
  const int lists = api_.lists();
  auto relabelled = make_inference_pool("vllm-pool", {{"tier", "decode"}, {"app", "vllm"}}, {8002});
  relabelled["metadata"].as_object()["labels"] = boost::json::object{{"team", "infra"}};
  api_.upsert(relabelled);
  api_.upsert(make_pod("vllm-e", "127.0.0.5", 8001, true, {{"tier", "decode"}}));
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.1:8002", "http://127.0.0.3:8002", "http://127.0.0.5:8002"}));
  EXPECT_EQ(api_.lists(), lists);
  // Re-selections are not resyncs (their differences are not a watch's misses), and the
  // watches they interrupted are not errors.
  for (const auto& r : sink_.reports()) EXPECT_FALSE(r.resync);
  EXPECT_TRUE(sink_.errors().empty()) << all_errors();
  EXPECT_EQ(api_.gets(), 1);
}

TEST_F(InferencePoolSourceTest, AMissingPoolIsReportedUntilItIsCreatedAndADeletedOneKeepsItsPods) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true));
  start();
  ASSERT_TRUE(wait_error(
      "kubernetes: InferencePool llm/vllm-pool: not found (GET "
      "/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools/vllm-pool -> 404; no "
      "endpoints from it until it is read)"))
      << all_errors();
  // The source waits on a watch of the pool (from its current state), not on the pods.
  ASSERT_TRUE(wait_watches(/*pool=*/true, 1));
  EXPECT_EQ(watches_of(true).at(0).find("resourceVersion="), std::string::npos)
      << watches_of(true).at(0);
  EXPECT_TRUE(sink_.reports().empty());
  EXPECT_EQ(api_.lists(), 0);

  // Created: it arrives through the watch.
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {8001}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001"}));
  EXPECT_EQ(api_.gets(), 1);

  // Deleted: an error; the pods of its last spec stay followed.
  const size_t errors = sink_.errors().size();
  api_.remove("vllm-pool", "InferencePool");
  ASSERT_TRUE(
      wait_error("kubernetes: InferencePool llm/vllm-pool: deleted (the pods of its last "
                 "good spec stay followed)"))
      << all_errors();
  EXPECT_EQ(sink_.errors().size(), errors + 1);
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, true));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.2:8001"}));
}

TEST_F(InferencePoolSourceTest, AMalformedPoolIsReportedAndTheLastGoodSpecKept) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true, {{"tier", "decode"}}));
  api_.upsert(make_pod("vllm-b", "127.0.0.2", 8001, true, {{"tier", "prefill"}}));
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {}));  // no targetPorts
  start();
  ASSERT_TRUE(wait_error(
      "kubernetes: InferencePool llm/vllm-pool: spec.targetPorts: missing or empty (the pool "
      "names no port of its pods) (no endpoints from it until it is read)"))
      << all_errors();
  ASSERT_TRUE(wait_watches(/*pool=*/true, 1));
  EXPECT_TRUE(sink_.reports().empty());

  // Fixed: its pods come in.
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {8001}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.2:8001"}));

  // Broken again (an empty selector would take every pod of the namespace): reported,
  // and the last good spec stays in force: a pod it selects still joins.
  api_.upsert(make_inference_pool("vllm-pool", {}, {8001}));
  ASSERT_TRUE(wait_error(
      "kubernetes: InferencePool llm/vllm-pool: spec.selector.matchLabels: missing or empty (it "
      "would select every pod of the namespace) (the pods of its last good spec stay followed)"))
      << all_errors();
  api_.upsert(make_pod("vllm-c", "127.0.0.3", 8001, true));
  ASSERT_TRUE(sink_.wait_for_urls(
      {"http://127.0.0.1:8001", "http://127.0.0.2:8001", "http://127.0.0.3:8001"}));
  // A port out of range, then a good edit: the good one applies.
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {0}));
  ASSERT_TRUE(wait_error("spec.targetPorts[0].number: expected a port, 1 to 65535"));
  api_.upsert(make_inference_pool("vllm-pool", {{"tier", "prefill"}}, {8001}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.2:8001"}));
}

TEST_F(InferencePoolSourceTest, EndedAndExpiredWatchesOfThePoolAreResumed) {
  api_.upsert(make_pod("vllm-a", "127.0.0.1", 8001, true));
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {8001}));
  start();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001"}));
  ASSERT_TRUE(wait_watches(/*pool=*/true, 1));
  ASSERT_TRUE(wait_watches(/*pool=*/false, 1));
  // The server ends both watches (its timeoutSeconds): both watch again from where they
  // were, without reading again.
  api_.end_watches();
  ASSERT_TRUE(wait_watches(/*pool=*/true, 2));
  ASSERT_TRUE(wait_watches(/*pool=*/false, 2));
  EXPECT_NE(watches_of(true).at(1).find("resourceVersion=1002"), std::string::npos)
      << watches_of(true).at(1);
  EXPECT_EQ(api_.gets(), 1);
  EXPECT_EQ(api_.lists(), 1);
  // History compacted: the pool's watch gets a 410 and watches its current state (no
  // resourceVersion; an edit made meanwhile arrives with it); the pods are listed again.
  api_.upsert_silently(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {8001, 8002}));
  api_.compact();
  api_.end_watches();
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8001", "http://127.0.0.1:8002"}))
      << all_errors();
  ASSERT_TRUE(wait_watches(/*pool=*/true, 4));
  const std::vector<std::string> pool = watches_of(true);
  EXPECT_EQ(pool.at(3).find("resourceVersion="), std::string::npos) << pool.at(3);
  EXPECT_EQ(api_.gets(), 1);  // not a GET: its resourceVersion would be as old as its edit
  // The watch of the current state goes on: a later edit arrives through it.
  api_.upsert(make_inference_pool("vllm-pool", {{"app", "vllm"}}, {8002}));
  ASSERT_TRUE(sink_.wait_for_urls({"http://127.0.0.1:8002"}));
  EXPECT_TRUE(sink_.errors().empty()) << all_errors();  // 410 is routine
}

}  // namespace kvgate::testing::discovery_inference_pool_test
