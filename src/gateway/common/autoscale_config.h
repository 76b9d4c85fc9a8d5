// PoolAutoscaleConfig: a pool's `autoscale:` section as `kvgate serve` reads it.
//
// The policy part (signal, target, bounds, behavior, forecasts, schedules, cold starts)
// is the core's AutoscaleConfig, parsed by the core's own parser
// (core/scale/config_yaml_node.h); `kvgate serve` adds three keys of its own:
//
//   autoscale:
//     signal: waiting
//     target: 4
//     min_replicas: 1
//     max_replicas: 4
//     interval: 1s          # how often the autoscaler decides
//     window: 30s           # token rates and TTFT/ITL percentiles cover this much
//     actuator:             # who carries decisions out; absent: kind none
//       kind: local         # local | kubernetes | none (export the metrics only)
//       command: "kvgate engine --port {port} --startup cold --time-scale 0.01"
//
// docs/autoscaler.md ("Running in kvgate serve") documents every field.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/scale/config.h"
#include "io/k8s_scale_client.h"

namespace YAML {
class Node;
}

namespace kvgate::gateway {

enum class ActuatorKind : uint8_t {
  kNone,        // decide and export kvgate_autoscaler_* only (KEDA or an HPA acts on them)
  kLocal,       // launch replicas as local processes (io::LocalReplicaSet)
  kKubernetes,  // set spec.replicas of a Deployment or StatefulSet (io::KubeScaleClient)
};

std::string_view actuator_name(ActuatorKind kind);

struct LocalReplicaConfig {
  // argv template; "{port}" (a free port) and "{id}" ("replica-N") are substituted at
  // launch, "{config_dir}" (the config file's directory) when the config is loaded. A
  // first word "kvgate" means this very binary.
  std::vector<std::string> command;
  std::string host = "127.0.0.1";
  std::string health_path = "/health";
  std::chrono::milliseconds startup_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds drain_timeout{std::chrono::minutes(2)};
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
  bool restart_crashed = true;
  // Copy each replica's output lines into the gateway's log (tagged pool/replica).
  bool log_output = false;
};

struct KubernetesReplicaConfig {
  io::KubeTarget target;  // ns empty: the gateway pod's own namespace
  // Both empty: in-cluster (service account token and CA). api_server
  // "http://127.0.0.1:8001": through a `kubectl proxy` (plain HTTP, the proxy
  // authenticates). kubeconfig: a kubeconfig file's current context (its server, CA and
  // token or tokenFile, and its namespace when `namespace` is not set), the same file a
  // pool's Kubernetes discovery can use. Relative to the config file's directory.
  std::string api_server;
  std::string kubeconfig;
};

struct PoolAutoscaleConfig {
  scale::AutoscaleConfig policy;
  ActuatorKind actuator = ActuatorKind::kNone;
  LocalReplicaConfig local;
  KubernetesReplicaConfig kubernetes;
  std::chrono::milliseconds interval{1000};
  Nanos window = 30 * kSecond;
};

// Parses the section; `path` names it in errors ("pools.main.autoscale"), `file` the
// config file (empty: none). Errors are in the format of every config error
// (core/common/yaml_reader.h): "fleet.yaml:14:15: pools.main.autoscale.actuator.kind:
// expected local, kubernetes or none, got 'docker'".
Result<PoolAutoscaleConfig> parse_pool_autoscale(const YAML::Node& section, const std::string& path,
                                                 std::string_view file = {});

// "kvgate engine --port {port} --model 'a b'" -> {"kvgate", "engine", "--port", "{port}",
// "--model", "a b"}: split on blanks, single and double quotes group. Errors: an
// unterminated quote.
Result<std::vector<std::string>> split_command(std::string_view command);

}  // namespace kvgate::gateway
