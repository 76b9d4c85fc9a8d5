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

}  // namespace
}  // namespace kvgate::discovery
