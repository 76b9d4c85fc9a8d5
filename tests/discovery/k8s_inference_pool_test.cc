// An InferencePool (inference.networking.k8s.io/v1, the Gateway API Inference
// Extension's) as the API server returns it, into the pods' selector and target ports,
// and a pod into one endpoint per target port.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "discovery/k8s_objects.h"

namespace kvgate::discovery::k8s_inference_pool_test {

// A GET of the object: TypeMeta, ObjectMeta with the server's fields, spec with the v1
// field names (selector.matchLabels, targetPorts[].number, endpointPickerRef), and the
// status a gateway writes.
const char* kPool = R"({
  "apiVersion": "inference.networking.k8s.io/v1",
  "kind": "InferencePool",
  "metadata": {
    "name": "vllm-qwen3", "namespace": "llm", "uid": "5d0c9a7e-2f1b-4c8e-9a3d-7b6e5f4a3c2d",
    "resourceVersion": "73120", "generation": 3, "creationTimestamp": "2026-11-30T09:00:00Z",
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
  },
  "spec": {
    "selector": {"matchLabels": {"tier": "decode", "app": "vllm-qwen3"}},
    "targetPorts": [{"number": 8000}],
    "endpointPickerRef": {"group": "", "kind": "Service", "name": "kvgate-epp",
                          "port": {"number": 9002}, "failureMode": "FailClose"}
  },
  "status": {
    "parents": [{
      "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway"},
      "conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 3,
         "lastTransitionTime": "2026-11-30T09:00:05Z", "message": ""},
        {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "observedGeneration": 3,
         "lastTransitionTime": "2026-11-30T09:00:05Z", "message": ""}
      ]
    }]
  }
})";

const char* kPod = R"({
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {
    "name": "vllm-qwen3-5f7d-x2k9p", "namespace": "llm", "resourceVersion": "73200",
    "labels": {"app": "vllm-qwen3", "tier": "decode", "kvgate.io/role": "decode"},
    "annotations": {"kvgate.io/kv-events-port": "5557, 5567", "kvgate.io/kv-replay-port": "5558"}
  },
  "spec": {"containers": [{"name": "vllm", "ports": [{"name": "http", "containerPort": 8000}]}]},
  "status": {
    "phase": "Running",
    "conditions": [{"type": "Ready", "status": "True"}],
    "podIP": "10.244.1.9", "podIPs": [{"ip": "10.244.1.9"}]
  }
})";

boost::json::value pool() { return boost::json::parse(kPool); }

// The error of the pool after `edit` (empty: none).
template <typename Edit>
std::string error_after(Edit edit) {
  boost::json::value v = pool();
  edit(v.at("spec").as_object());
  Result<InferencePoolTarget> t = inference_pool_target(v);
  return t ? std::string() : t.error();
}

TEST(K8sInferencePool, SelectorAndTargetPortsOfAV1Object) {
  const boost::json::value v = pool();
  EXPECT_EQ(object_name(v), "vllm-qwen3");
  EXPECT_EQ(object_resource_version(v), "73120");
  Result<InferencePoolTarget> t = inference_pool_target(v);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->selector, "app=vllm-qwen3,tier=decode");  // keys sorted
  EXPECT_EQ(t->ports, std::vector<uint16_t>{8000});
  // The pods path is the one the label-selector path uses.
  EXPECT_EQ(pods_list_path("llm", t->selector),
            "/api/v1/namespaces/llm/pods?labelSelector=app%3Dvllm-qwen3%2Ctier%3Ddecode");
  EXPECT_EQ(inference_pool_path("llm", "vllm-qwen3"),
            "/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools/vllm-qwen3");
  EXPECT_EQ(inference_pool_watch_path("llm", "vllm-qwen3"),
            "/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools"
            "?fieldSelector=metadata.name%3Dvllm-qwen3");
  // Equal specs compare equal (the source re-selects only on a change).
  boost::json::value same = pool();
  same.at("metadata").as_object()["resourceVersion"] = "73121";
  Result<InferencePoolTarget> again = inference_pool_target(same);
  ASSERT_TRUE(again);
  EXPECT_TRUE(*again == *t);
}

TEST(K8sInferencePool, SeveralTargetPortsAndAnExplicitHttpProtocol) {
  boost::json::value v = pool();
  boost::json::object& spec = v.at("spec").as_object();
  spec["targetPorts"] =
      boost::json::array{{{"number", 8000}}, {{"number", 8001}}, {{"number", 8002}}};
  spec["appProtocol"] = "http";
  Result<InferencePoolTarget> t = inference_pool_target(v);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->ports, (std::vector<uint16_t>{8000, 8001, 8002}));
}

TEST(K8sInferencePool, MalformedPoolsNameTheField) {
  EXPECT_EQ(error_after([](boost::json::object&) {}), "");
  EXPECT_EQ(error_after([](boost::json::object& s) { s.erase("targetPorts"); }),
            "spec.targetPorts: missing or empty (the pool names no port of its pods)");
  EXPECT_EQ(error_after([](boost::json::object& s) { s["targetPorts"] = boost::json::array{}; }),
            "spec.targetPorts: missing or empty (the pool names no port of its pods)");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              s["targetPorts"] = boost::json::array{{{"number", 8000}}, {{"number", 0}}};
            }),
            "spec.targetPorts[1].number: expected a port, 1 to 65535");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              s["targetPorts"] = boost::json::array{{{"number", 70000}}};
            }),
            "spec.targetPorts[0].number: expected a port, 1 to 65535");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              s["targetPorts"] = boost::json::array{{{"port", 8000}}};  // not the v1 name
            }),
            "spec.targetPorts[0].number: expected a port, 1 to 65535");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              s["targetPorts"] = boost::json::array{{{"number", 8000}}, {{"number", 8000}}};
            }),
            "spec.targetPorts[1].number: 8000 given twice");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              boost::json::array ports;
              for (int p = 8000; p < 8009; ++p) ports.push_back(boost::json::object{{"number", p}});
              s["targetPorts"] = std::move(ports);
            }),
            "spec.targetPorts: 9 ports (at most 8)");
  EXPECT_EQ(error_after([](boost::json::object& s) { s.erase("selector"); }),
            "spec.selector.matchLabels: missing or empty (it would select every pod of the "
            "namespace)");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              s["selector"] = boost::json::object{{"matchLabels", boost::json::object{}}};
            }),
            "spec.selector.matchLabels: missing or empty (it would select every pod of the "
            "namespace)");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              s["selector"] = boost::json::object{{"matchLabels", {{"app", "a,b=c"}}}};
            }),
            "spec.selector.matchLabels.app: 'a,b=c' is not a Kubernetes label");
  EXPECT_EQ(error_after([](boost::json::object& s) {
              s["selector"] = boost::json::object{{"matchLabels", {{"app", 3}}}};
            }),
            "spec.selector.matchLabels.app: expected a string");
  EXPECT_EQ(error_after([](boost::json::object& s) { s["appProtocol"] = "kubernetes.io/h2c"; }),
            "spec.appProtocol: 'kubernetes.io/h2c' is not supported (kvgate speaks HTTP/1.1 to "
            "engines)");
  boost::json::value no_spec = pool();
  no_spec.as_object().erase("spec");
  Result<InferencePoolTarget> t = inference_pool_target(no_spec);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), "spec: missing");
  EXPECT_FALSE(inference_pool_target(boost::json::value("InferencePool")));
}

TEST(K8sInferencePool, APodIsAnEndpointPerTargetPort) {
  KubernetesSourceConfig c;
  c.inference_pool = "vllm-qwen3";
  const boost::json::value pod = boost::json::parse(kPod);
  // The ports are the pool's, whatever the pod's container ports say.
  auto eps = pod_endpoints(pod, c, {8000, 8001, 8002});
  ASSERT_EQ(eps.size(), 3u);
  EXPECT_EQ(eps[0].spec.url, "http://10.244.1.9:8000");
  EXPECT_EQ(eps[1].spec.url, "http://10.244.1.9:8001");
  EXPECT_EQ(eps[2].spec.url, "http://10.244.1.9:8002");
  for (const DiscoveredEndpoint& e : eps) {
    EXPECT_TRUE(e.ready);
    EXPECT_EQ(e.spec.role, Role::kDecode);
  }
  // The KV events annotations: one entry per target port, in order.
  ASSERT_TRUE(eps[0].kv_events);
  EXPECT_EQ(eps[0].kv_events->publisher, "tcp://10.244.1.9:5557");
  EXPECT_EQ(eps[0].kv_events->replay, "tcp://10.244.1.9:5558");
  ASSERT_TRUE(eps[1].kv_events);
  EXPECT_EQ(eps[1].kv_events->publisher, "tcp://10.244.1.9:5567");
  EXPECT_EQ(eps[1].kv_events->replay, "");
  EXPECT_FALSE(eps[2].kv_events);
  // One port: the pod as the label-selector path sees it at its named port.
  auto one = pod_endpoints(pod, c, {8000});
  ASSERT_EQ(one.size(), 1u);
  KubernetesSourceConfig named;
  named.selector = "app=vllm-qwen3";
  auto by_name = pod_endpoints(pod, named);
  ASSERT_EQ(by_name.size(), 1u);
  EXPECT_EQ(by_name[0].spec.url, one[0].spec.url);
  EXPECT_EQ(by_name[0].kv_events->publisher, one[0].kv_events->publisher);
  // Not scheduled: no endpoint at any port.
  boost::json::value pending = boost::json::parse(kPod);
  pending.at("status").as_object().erase("podIP");
  EXPECT_TRUE(pod_endpoints(pending, c, {8000, 8001}).empty());
}

}  // namespace kvgate::discovery::k8s_inference_pool_test
