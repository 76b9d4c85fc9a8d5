// Pods and EndpointSlices shaped as the Kubernetes API reference documents them (core/v1
// Pod, discovery.k8s.io/v1 EndpointSlice), into endpoints.
#include "discovery/k8s_objects.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::discovery {
namespace {

const char* kPod = R"({
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {
    "name": "vllm-decode-7c9f-abcde", "generateName": "vllm-decode-7c9f-", "namespace": "llm",
    "uid": "0b8d1c3e-6a57-4d2e-9d7c-1f2e3a4b5c6d", "resourceVersion": "48211",
    "creationTimestamp": "2026-11-30T10:00:00Z",
    "labels": {"app": "vllm", "kvgate.io/role": "decode", "topology.kubernetes.io/zone": "eu-west-1a",
               "kvgate.io/rack": "r12", "model": "qwen3", "pod-template-hash": "7c9f"},
    "annotations": {"kvgate.io/kv-events-port": "5557", "kvgate.io/kv-replay-port": "5558"},
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-decode-7c9f",
                         "uid": "a1", "controller": true, "blockOwnerDeletion": true}]
  },
  "spec": {
    "containers": [
      {"name": "sidecar", "image": "busybox", "ports": [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}]},
      {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
       "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]}
    ],
    "nodeName": "node-3", "restartPolicy": "Always"
  },
  "status": {
    "phase": "Running",
    "conditions": [
      {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-30T10:00:01Z"},
      {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T10:03:00Z"},
      {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-30T10:03:00Z"},
      {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z"}
    ],
    "hostIP": "10.0.3.4", "podIP": "10.244.3.17", "podIPs": [{"ip": "10.244.3.17"}],
    "startTime": "2026-11-30T10:00:00Z"
  }
})";

KubernetesSourceConfig config() {
  KubernetesSourceConfig c;
  c.selector = "app=vllm";
  c.labels = {"model", "absent"};
  return c;
}

TEST(K8sObjects, AReadyPod) {
  auto v = boost::json::parse(kPod);
  EXPECT_EQ(object_name(v), "vllm-decode-7c9f-abcde");
  EXPECT_EQ(object_resource_version(v), "48211");
  auto eps = pod_endpoints(v, config());
  ASSERT_EQ(eps.size(), 1u);
  const DiscoveredEndpoint& e = eps[0];
  EXPECT_TRUE(e.ready);
  EXPECT_EQ(e.spec.url, "http://10.244.3.17:8000");
  EXPECT_EQ(e.spec.role, Role::kDecode);
  EXPECT_EQ(e.spec.zone, "eu-west-1a");
  EXPECT_EQ(e.spec.rack, "r12");
  ASSERT_EQ(e.spec.labels.size(), 1u);
  EXPECT_EQ(e.spec.label("model"), "qwen3");
  ASSERT_TRUE(e.kv_events);
  EXPECT_EQ(e.kv_events->publisher, "tcp://10.244.3.17:5557");
  EXPECT_EQ(e.kv_events->replay, "tcp://10.244.3.17:5558");
}

TEST(K8sObjects, NotReadyTerminatingOrUnscheduledPods) {
  auto not_ready = boost::json::parse(kPod);
  not_ready.at("status").at("conditions").as_array()[1].as_object()["status"] = "False";
  EXPECT_FALSE(pod_endpoints(not_ready, config()).at(0).ready);

  auto terminating = boost::json::parse(kPod);
  terminating.at("metadata").as_object()["deletionTimestamp"] = "2026-11-30T11:00:00Z";
  terminating.at("metadata").as_object()["deletionGracePeriodSeconds"] = 30;
  EXPECT_FALSE(pod_endpoints(terminating, config()).at(0).ready);

  auto pending = boost::json::parse(kPod);
  pending.at("status").as_object()["phase"] = "Pending";
  EXPECT_FALSE(pod_endpoints(pending, config()).at(0).ready);

  auto unscheduled = boost::json::parse(kPod);
  unscheduled.at("status").as_object().erase("podIP");
  EXPECT_TRUE(pod_endpoints(unscheduled, config()).empty());

  KubernetesSourceConfig other = config();
  other.port_name = "grpc";
  EXPECT_TRUE(pod_endpoints(boost::json::parse(kPod), other).empty());
}

TEST(K8sObjects, ConfiguredLabelNamesAndIpv6) {
  auto v = boost::json::parse(kPod);
  v.at("status").as_object()["podIP"] = "fd00:10:244::17";
  KubernetesSourceConfig c = config();
  c.zone_label = "model";
  c.role_label = "nope";
  auto e = pod_endpoints(v, c).at(0);
  EXPECT_EQ(e.spec.url, "http://[fd00:10:244::17]:8000");
  EXPECT_EQ(e.spec.zone, "qwen3");
  EXPECT_EQ(e.spec.role, Role::kBoth);
  EXPECT_EQ(e.kv_events->publisher, "tcp://[fd00:10:244::17]:5557");
}

const char* kSlice = R"({
  "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
  "metadata": {"name": "vllm-x7k2p", "namespace": "llm", "resourceVersion": "9001",
               "labels": {"kubernetes.io/service-name": "vllm", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
  "addressType": "IPv4",
  "endpoints": [
    {"addresses": ["10.244.1.5"], "conditions": {"ready": true, "serving": true, "terminating": false},
     "nodeName": "node-1", "zone": "eu-west-1a",
     "targetRef": {"kind": "Pod", "namespace": "llm", "name": "vllm-0", "uid": "u0"}},
    {"addresses": ["10.244.2.6"], "conditions": {"ready": false, "serving": true, "terminating": true},
     "nodeName": "node-2", "zone": "eu-west-1b",
     "targetRef": {"kind": "Pod", "namespace": "llm", "name": "vllm-1", "uid": "u1"}},
    {"addresses": ["10.244.3.7"], "conditions": {}, "zone": "eu-west-1c"},
    {"addresses": ["10.244.4.8", "10.244.4.9"], "conditions": {"ready": true}, "zone": "eu-west-1a"}
  ],
  "ports": [{"name": "http", "protocol": "TCP", "port": 8000}, {"name": "kv-events", "protocol": "TCP", "port": 5557}]
})";

TEST(K8sObjects, AnEndpointSlice) {
  KubernetesSourceConfig c;
  c.mode = KubernetesSourceConfig::Mode::kEndpointSlices;
  c.service = "vllm";
  auto eps = slice_endpoints(boost::json::parse(kSlice), c);
  ASSERT_EQ(eps.size(), 4u);
  EXPECT_EQ(eps[0].spec.url, "http://10.244.1.5:8000");
  EXPECT_TRUE(eps[0].ready);
  EXPECT_EQ(eps[0].spec.zone, "eu-west-1a");
  EXPECT_EQ(eps[0].kv_events->publisher, "tcp://10.244.1.5:5557");
  EXPECT_FALSE(eps[1].ready);  // terminating
  EXPECT_TRUE(eps[2].ready);   // no ready condition: unknown, taken as ready
  // One backend with two (fungible) addresses is one endpoint, at the first.
  EXPECT_EQ(eps[3].spec.url, "http://10.244.4.8:8000");
  EXPECT_EQ(list_path(c, "llm"),
            "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices?labelSelector="
            "kubernetes.io%2Fservice-name%3Dvllm");
}

TEST(K8sObjects, ThePodListPath) {
  KubernetesSourceConfig c;
  c.selector = "app=vllm,tier in (decode)";
  EXPECT_EQ(list_path(c, "llm"),
            "/api/v1/namespaces/llm/pods?labelSelector=app%3Dvllm%2Ctier%20in%20%28decode%29");
}

TEST(K8sObjects, APodsDataParallelRanksFromTheSourceOrItsAnnotation) {
  // The source's size: every pod's endpoint is that many rank endpoints, KV ports + rank.
  KubernetesSourceConfig c = config();
  c.data_parallel_size = 2;
  auto eps = pod_endpoints(boost::json::parse(kPod), c);
  ASSERT_EQ(eps.size(), 2u);
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(eps[r].spec.url, "http://10.244.3.17:8000#dp" + std::to_string(r));
    EXPECT_TRUE(eps[r].ready);
    EXPECT_EQ(eps[r].spec.role, Role::kDecode);
    ASSERT_TRUE(eps[r].kv_events);
    EXPECT_EQ(eps[r].kv_events->publisher, "tcp://10.244.3.17:" + std::to_string(5557 + r));
    EXPECT_EQ(eps[r].kv_events->replay, "tcp://10.244.3.17:" + std::to_string(5558 + r));
  }

  // The pod's annotation wins over the source's size; "1" makes it a plain endpoint.
  auto annotated = boost::json::parse(kPod);
  annotated.at("metadata").at("annotations").as_object()["kvgate.io/data-parallel-size"] = "4";
  EXPECT_EQ(pod_data_parallel_size(annotated, c).value(), 4u);
  eps = pod_endpoints(annotated, c);
  ASSERT_EQ(eps.size(), 4u);
  EXPECT_EQ(eps[3].spec.url, "http://10.244.3.17:8000#dp3");
  EXPECT_EQ(eps[3].kv_events->publisher, "tcp://10.244.3.17:5560");
  annotated.at("metadata").at("annotations").as_object()["kvgate.io/data-parallel-size"] = "1";
  eps = pod_endpoints(annotated, c);
  ASSERT_EQ(eps.size(), 1u);
  EXPECT_EQ(eps[0].spec.url, "http://10.244.3.17:8000");

  // A not-ready pod's ranks are not ready either.
  auto not_ready = boost::json::parse(kPod);
  not_ready.at("status").at("conditions").as_array()[1].as_object()["status"] = "False";
  eps = pod_endpoints(not_ready, c);
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_FALSE(eps[0].ready);
  EXPECT_FALSE(eps[1].ready);

  // A configured annotation name; an annotation that is not a size leaves the pod out,
  // and the error names the pod, the annotation and the value.
  KubernetesSourceConfig named = config();
  named.data_parallel_size_annotation = "example.com/dp";
  for (const char* bad : {"0", "257", "four", "", "2x", "-1"}) {
    auto v = boost::json::parse(kPod);
    v.at("metadata").at("annotations").as_object()["example.com/dp"] = bad;
    EXPECT_TRUE(pod_endpoints(v, named).empty()) << bad;
    Result<uint32_t> size = pod_data_parallel_size(v, named);
    ASSERT_FALSE(size) << bad;
    EXPECT_EQ(size.error(), std::string("pod vllm-decode-7c9f-abcde: annotation example.com/dp: "
                                        "expected a number of data-parallel ranks, 1 to 256, "
                                        "got '") +
                                bad + "' (the pod is left out)");
  }
  EXPECT_EQ(pod_data_parallel_size(boost::json::parse(kPod), named).value(), 1u);
}

TEST(K8sObjects, AnInferencePoolsTargetPortsEachServeTheRanks) {
  // Two target ports (two servers in the pod), each with two ranks: four endpoints, each
  // port's KV events from its entry of the list plus the rank.
  auto v = boost::json::parse(kPod);
  auto& annotations = v.at("metadata").at("annotations").as_object();
  annotations["kvgate.io/kv-events-port"] = "5557,5567";
  annotations["kvgate.io/kv-replay-port"] = "";
  annotations["kvgate.io/data-parallel-size"] = "2";
  KubernetesSourceConfig c = config();
  c.selector.clear();
  c.inference_pool = "vllm";
  auto eps = pod_endpoints(v, c, {8000, 8001});
  ASSERT_EQ(eps.size(), 4u);
  EXPECT_EQ(eps[0].spec.url, "http://10.244.3.17:8000#dp0");
  EXPECT_EQ(eps[1].spec.url, "http://10.244.3.17:8000#dp1");
  EXPECT_EQ(eps[2].spec.url, "http://10.244.3.17:8001#dp0");
  EXPECT_EQ(eps[3].spec.url, "http://10.244.3.17:8001#dp1");
  EXPECT_EQ(eps[1].kv_events->publisher, "tcp://10.244.3.17:5558");
  EXPECT_EQ(eps[3].kv_events->publisher, "tcp://10.244.3.17:5568");
  EXPECT_TRUE(eps[3].kv_events->replay.empty());
}

TEST(K8sObjects, AnEndpointSlicesEntriesServeTheSourcesRanks) {
  KubernetesSourceConfig c;
  c.mode = KubernetesSourceConfig::Mode::kEndpointSlices;
  c.service = "vllm";
  c.data_parallel_size = 3;
  auto eps = slice_endpoints(boost::json::parse(kSlice), c);
  ASSERT_EQ(eps.size(), 12u);  // four entries, three ranks each
  EXPECT_EQ(eps[0].spec.url, "http://10.244.1.5:8000#dp0");
  EXPECT_EQ(eps[2].spec.url, "http://10.244.1.5:8000#dp2");
  EXPECT_EQ(eps[2].kv_events->publisher, "tcp://10.244.1.5:5559");
  EXPECT_EQ(eps[2].spec.zone, "eu-west-1a");
  EXPECT_FALSE(eps[3].ready);  // the terminating entry's ranks
  EXPECT_FALSE(eps[5].ready);
  EXPECT_EQ(eps[11].spec.url, "http://10.244.4.8:8000#dp2");
}

}  // namespace
}  // namespace kvgate::discovery
