// DiscoveryConfig: a pool's `discovery:` section (docs/discovery.md), parsed once.
//
//   pools:
//     main:
//       discovery:
//         grace_ms: 30000          # a vanished endpoint keeps its index entries this long
//         hold_empty: true         # a sudden empty set is not believed...
//         hold_empty_max_ms: 0     # ...until this long (0: until endpoints come back)
//         drain_timeout_ms: 30000  # streams on a removed endpoint may finish this long
//         sources:
//           - {kind: file, path: endpoints.yaml}
//           - {kind: dns, name: engines.llm.svc.cluster.local, record: a, port: 8000}
//           - {kind: dns, name: dp, hostname: dp.llm.svc, port: 8000, data_parallel_size: 4}
//           - {kind: kubernetes, namespace: llm, selector: app=vllm, port_name: http}
//           - {kind: kubernetes, name: pool, namespace: llm, inference_pool: vllm}
//
// Each source kind is a small object behind one interface (source.h), chosen by `kind`
// from a registry; its keys are parsed here into its own struct. Errors name the file,
// line, column and field, like the rest of the config.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/common/result.h"
#include "core/route/endpoint.h"

namespace YAML {
class Node;
}

namespace kvgate::discovery {

using std::chrono::milliseconds;

struct FileSourceConfig {
  std::string path;             // YAML or JSON in the `endpoints:` schema
  milliseconds reread{10'000};  // re-read this often even without inotify events
  milliseconds settle{50};      // after an event, wait this long for more (coalesce)
  bool kv_events_bind = false;  // the pool binds one SUB socket (endpoints name a topic)
};

// What every endpoint of a DNS answer gets (DNS carries only addresses and ports).
struct EndpointTemplate {
  Role role = Role::kBoth;
  std::string zone;
  std::string rack;
  std::vector<std::pair<std::string, std::string>> labels;
  uint16_t kv_events_port = 0;  // 0: no KV events; else tcp://ADDRESS:PORT
  uint16_t kv_replay_port = 0;
};

struct DnsSourceConfig {
  enum class Record : uint8_t { kA, kAAAA, kSrv };
  std::string name;  // a headless Service's name, or an SRV name (_http._tcp.NAME)
  Record record = Record::kA;
  uint16_t port = 0;                 // the HTTP port (A/AAAA; SRV records carry their own)
  milliseconds interval{5'000};      // re-resolve at least this often...
  milliseconds min_interval{1'000};  // ...and when the shortest TTL runs out, not sooner
  milliseconds timeout{2'000};       // per query (one retry)
  std::string server;                // "ADDRESS:PORT" (IPv4); empty: /etc/resolv.conf
  EndpointTemplate endpoint;
  // Data-parallel ranks behind every address (route/data_parallel.h): > 1, each address
  // is that many endpoints URL#dp0.., rank r's KV event ports + r.
  uint32_t data_parallel_size = 1;
};

struct KubernetesSourceConfig {
  enum class Mode : uint8_t { kPods, kEndpointSlices };
  Mode mode = Mode::kPods;
  std::string ns;        // namespace; empty: the pod's own (service account)
  std::string selector;  // label selector of the pods (mode pods)
  // An InferencePool (inference.networking.k8s.io/v1) whose spec.selector and
  // spec.targetPorts give the pods and their ports (mode pods; no selector, no port_name).
  std::string inference_pool;
  std::string service;             // the Service whose EndpointSlices (mode endpointslices)
  std::string port_name = "http";  // named container port (pods) or EndpointSlice port
  std::string role_label = "kvgate.io/role";
  std::string zone_label = "topology.kubernetes.io/zone";
  std::string rack_label = "kvgate.io/rack";
  std::vector<std::string> labels;  // pod labels copied into the endpoint's labels
  std::string kv_events_port_annotation = "kvgate.io/kv-events-port";
  std::string kv_replay_port_annotation = "kvgate.io/kv-replay-port";
  std::string kv_topic_annotation = "kvgate.io/kv-events-topic";
  // Data-parallel ranks behind every endpoint (route/data_parallel.h; mode pods, an
  // InferencePool's target ports, EndpointSlices); a pod's annotation, when present,
  // gives its own (mode pods and inference_pool; slices carry no annotations).
  uint32_t data_parallel_size = 1;
  std::string data_parallel_size_annotation = "kvgate.io/data-parallel-size";
  milliseconds resync{300'000};         // a full LIST this often, watch or not
  milliseconds timeout{10'000};         // per request (a WATCH runs longer: timeoutSeconds)
  milliseconds watch_timeout{290'000};  // asked of the server for one WATCH
  milliseconds backoff{1'000};          // after a failed LIST or WATCH
  std::string kubeconfig;               // a kubeconfig file; empty: in-cluster
  // In-cluster service account files (the standard paths unless given).
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

struct SourceConfig {
  std::string kind;  // file | dns | kubernetes
  std::string name;  // unique in the pool; the `source` label of its metrics
  std::variant<FileSourceConfig, DnsSourceConfig, KubernetesSourceConfig> params;
};

struct DiscoveryConfig {
  std::vector<SourceConfig> sources;
  milliseconds grace{30'000};
  bool hold_empty = true;
  milliseconds hold_empty_max{0};
  milliseconds drain_timeout{30'000};
};

// `field` is the section's path ("pools.main.discovery"), `dir` anchors relative paths,
// `kv_events_bind`: the pool has a kv_events_bind address.
Result<DiscoveryConfig> parse_discovery(const YAML::Node& section, std::string_view file,
                                        const std::string& field, const std::filesystem::path& dir,
                                        bool kv_events_bind);

// The source kinds the registry knows, for errors and --help.
std::vector<std::string_view> source_kinds();

}  // namespace kvgate::discovery
