#include "gateway/control/actuator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "gateway/data/pool_runtime.h"
#include "io/http_client.h"
#include "io/k8s_client.h"
#include "io/k8s_scale_client.h"
#include "io/local_replica_set.h"

namespace kvgate::gateway {
namespace {

using std::chrono::milliseconds;

// Replicas asked for and not yet among the endpoints. The core expects what it asked for
// to be reported as starting from then on (or it asks again, and its rate limits count
// the first ask as done); endpoints that appear replace the oldest asks first.
class PendingAsks {
 public:
  // Appends the asks still missing to `out`, the endpoints' replicas: `requested` less
  // the endpoints not draining. With `assume_ready_after`, an ask that old is reported
  // ready (someone else starts the replicas and we cannot see them start); without it,
  // an ask stays starting until its endpoint appears (and turns stuck if it never does).
  void report(std::vector<scale::ReplicaSignal>& out, int32_t requested, Nanos now,
              std::optional<Nanos> assume_ready_after) {
    int32_t real = 0;
    for (const scale::ReplicaSignal& r : out) real += r.phase != scale::ReplicaPhase::kDraining;
    const size_t missing = static_cast<size_t>(std::max(requested - real, 0));
    while (pending_.size() > missing) pending_.pop_front();  // the oldest asks arrived first
    while (pending_.size() < missing) pending_.push_back({next_id_++, now});
    for (const Pending& p : pending_) {
      const bool up = assume_ready_after && now - p.asked_at >= *assume_ready_after;
      out.push_back({.id = fmt::format("requested-{}", p.id),
                     .phase = up ? scale::ReplicaPhase::kReady : scale::ReplicaPhase::kStarting,
                     .launched_at = p.asked_at,
                     .ready_at = up ? p.asked_at + *assume_ready_after : 0});
    }
  }
  // The autoscaler picked an ask for scale-down: it is no longer expected.
  void forget(const std::string& id) {
    std::erase_if(pending_,
                  [&](const Pending& p) { return fmt::format("requested-{}", p.id) == id; });
  }

 private:
  struct Pending {
    uint64_t id;
    Nanos asked_at;
  };
  std::deque<Pending> pending_;
  uint64_t next_id_ = 0;
};

// Kind none: the endpoints are the replicas, and someone else (KEDA, an HPA) carries
// the exported decision out. Asks not yet seen among the endpoints are reported as
// starting for the expected startup time, then as ready, until endpoints replace them.
class ExportOnlyActuator final : public Actuator {
 public:
  ExportOnlyActuator(Nanos clock_offset, Nanos startup, std::function<Nanos()> now)
      : clock_offset_(clock_offset), startup_(startup), now_(std::move(now)) {}
  void poll() override {}
  std::vector<scale::ReplicaSignal> replicas(
      std::span<const route::EndpointView> endpoints) override {
    std::vector<scale::ReplicaSignal> out =
        route::replicas_from_endpoints(endpoints, clock_offset_);
    pending_.report(out, requested_, now_(), startup_);
    return out;
  }
  void apply(const scale::Decision& d) override {
    requested_ = d.desired_replicas;
    for (const std::string& id : d.drain) pending_.forget(id);
  }

 private:
  Nanos clock_offset_;
  Nanos startup_;
  std::function<Nanos()> now_;
  int32_t requested_ = 0;
  PendingAsks pending_;
};

// Kind local: replicas are processes this gateway launches and registers.
class LocalActuator final : public Actuator {
 public:
  LocalActuator(const LocalReplicaConfig& config, ActuatorContext context)
      : pool_(context.pool), drain_timeout_(config.drain_timeout) {}

  ~LocalActuator() override {
    replica_set_.reset();  // stops every replica: requests still on them end at once
    for (auto& [id, d] : drains_) d.thread.join();
  }

  Status start(const LocalReplicaConfig& config, std::function<Nanos()> now) {
    io::LocalReplicaSetOptions o;
    o.command = config.command;
    if (o.command.front() == "kvgate") {
      std::error_code ec;
      auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      if (!ec) o.command.front() = self.string();
    }
    o.host = config.host;
    o.health_path = config.health_path;
    o.startup_timeout = config.startup_timeout;
    // The router drains first (remove_endpoint_sync, drain_timeout); the process is
    // stopped once that is done, or a little after it should have been.
    o.drain_timeout = config.drain_timeout + std::chrono::seconds(5);
    o.stop_grace = config.stop_grace;
    o.restart_crashed = config.restart_crashed;
    o.on_change = [this](const io::ReplicaChange& c) { on_change(c); };
    o.in_flight = [this](const std::string& id) -> uint32_t {
      auto it = drains_.find(id);
      return it != drains_.end() && !it->second.done->load() ? 1 : 0;
    };
    o.on_output = [this, log = config.log_output](const std::string& id, const std::string& line) {
      if (log) spdlog::info("[{}/{}] {}", pool_.name(), id, line);
      std::lock_guard lock(output_mu_);
      std::deque<std::string>& tail = output_[id];
      tail.push_back(line);
      if (tail.size() > kOutputLines) tail.pop_front();
    };
    o.now = std::move(now);
    auto made = io::LocalReplicaSet::make(std::move(o));
    if (!made) return Error(made.error());
    replica_set_ = std::move(*made);
    return {};
  }

  void poll() override {
    std::vector<std::string> starting;
    for (const scale::ReplicaSignal& r : replica_set_->replicas()) {
      if (r.phase == scale::ReplicaPhase::kStarting) starting.push_back(r.id);
    }
    replica_set_->poll();
    // A replica that never became ready and is gone exited during its start (or missed
    // startup_timeout): say why, from its last lines, or a bad command fails silently.
    std::set<std::string> present;
    for (const scale::ReplicaSignal& r : replica_set_->replicas()) present.insert(r.id);
    std::lock_guard lock(output_mu_);
    for (const std::string& id : starting) {
      if (present.contains(id)) continue;
      spdlog::warn("pool {}: {} stopped before it was ready; its last output:{}", pool_.name(), id,
                   last_output_locked(id));
    }
    std::erase_if(output_, [&](const auto& kv) { return !present.contains(kv.first); });
  }

  std::vector<scale::ReplicaSignal> replicas(
      std::span<const route::EndpointView> endpoints) override {
    std::vector<scale::ReplicaSignal> out = replica_set_->replicas();
    for (scale::ReplicaSignal& r : out) {
      r.in_flight = 0;
      auto it = registered_.find(r.id);
      if (it == registered_.end()) continue;
      for (const route::EndpointView& e : endpoints) {
        if (e.id == it->second) r.in_flight = e.in_flight;
      }
    }
    return out;
  }

  void apply(const scale::Decision& d) override {
    if (Status s = replica_set_->apply(d); !s) {
      spdlog::warn("pool {}: launching a replica failed: {}", pool_.name(), s.error());
    }
  }

  uint64_t restarts() const override { return replica_set_->restarts(); }

 private:
  struct Drain {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void on_change(const io::ReplicaChange& c) {
    switch (c.kind) {
      case io::ReplicaChange::Kind::kReady: {
        auto id = pool_.add_endpoint_sync(route::EndpointSpec{.url = c.url}, std::nullopt,
                                          "local_actuator");
        if (!id) {
          spdlog::warn("pool {}: {} at {} is healthy but could not be registered: {}", pool_.name(),
                       c.id, c.url, id.error());
          return;
        }
        registered_[c.id] = *id;
        spdlog::info("pool {}: {} ready at {}, routing to it", pool_.name(), c.id, c.url);
        return;
      }
      case io::ReplicaChange::Kind::kDraining: {
        auto it = registered_.find(c.id);
        if (it == registered_.end()) return;
        spdlog::info("pool {}: draining {} ({})", pool_.name(), c.id, c.url);
        auto done = std::make_shared<std::atomic<bool>>(false);
        // Off this thread: a drain waits for streams that may run for minutes, and the
        // autoscaler keeps deciding meanwhile.
        std::thread t(
            [pool = &pool_, id = it->second, timeout = drain_timeout_, done, name = c.id] {
              auto clean = pool->remove_endpoint_sync(id, timeout);
              if (!clean) {
                spdlog::warn("pool {}: removing {}: {}", pool->name(), name, clean.error());
              } else if (!*clean) {
                spdlog::warn("pool {}: {} still had requests after the drain timeout", pool->name(),
                             name);
              }
              done->store(true);
            });
        registered_.erase(it);
        drains_[c.id] = Drain{std::move(t), std::move(done)};
        return;
      }
      case io::ReplicaChange::Kind::kRemoved: {
        if (auto d = drains_.find(c.id); d != drains_.end()) {
          d->second.thread.join();
          drains_.erase(d);
        }
        if (auto it = registered_.find(c.id); it != registered_.end()) {
          // It exited without being drained: its requests have failed already.
          auto removed = pool_.remove_endpoint_sync(it->second, milliseconds(0));
          if (!removed)
            spdlog::warn("pool {}: removing {}: {}", pool_.name(), c.id, removed.error());
          registered_.erase(it);
        }
        if (c.crashed) {
          spdlog::warn("pool {}: {} ({}) exited on its own; replacing it; its last output:{}",
                       pool_.name(), c.id, c.url, last_output(c.id));
        } else {
          spdlog::info("pool {}: {} stopped", pool_.name(), c.id);
        }
        return;
      }
    }
  }

  static constexpr size_t kOutputLines = 8;

  std::string last_output(const std::string& id) {
    std::lock_guard lock(output_mu_);
    return last_output_locked(id);
  }
  std::string last_output_locked(const std::string& id) {  // REQUIRES: output_mu_ held
    std::string tail;
    for (const std::string& line : output_[id]) tail += "\n  " + line;
    return tail.empty() ? " (none)" : tail;
  }

  PoolRuntime& pool_;
  milliseconds drain_timeout_;
  std::mutex output_mu_;  // on_output runs on the replicas' reader threads
  std::map<std::string, std::deque<std::string>> output_;  // last lines, by replica
  std::unique_ptr<io::LocalReplicaSet> replica_set_;
  std::map<std::string, route::EndpointId> registered_;  // replica id -> router endpoint
  std::map<std::string, Drain> drains_;                  // replicas being drained
};

// Kind kubernetes: the replicas are the pods of a Deployment or StatefulSet. When the
// pool also discovers its endpoints from Kubernetes, the discovered endpoints are the
// Ready pods (discovery admits a pod only while it is Ready and not terminating, after
// warm-up), and the rest of spec.replicas is starting since it was asked for. Without
// discovery the scale subresource is all there is: the oldest status.replicas of the
// pods asked for count as ready.
class KubernetesActuator final : public Actuator {
 public:
  KubernetesActuator(io::KubeConfig config, io::KubeTarget target, ActuatorContext context)
      : client_(std::move(config)),
        target_(std::move(target)),
        name_(context.pool.name()),
        now_(std::move(context.now)),
        clock_offset_(context.clock_offset),
        discovered_(discovers_from_kubernetes(context.pool.config())) {}

  void poll() override {
    auto s = client_.get_scale(target_);
    if (!s) {
      warn(s.error());
      return;
    }
    scale_ = *s;
    reconcile();
  }

  std::vector<scale::ReplicaSignal> replicas(
      std::span<const route::EndpointView> endpoints) override {
    if (!discovered_) return pods_;
    std::vector<scale::ReplicaSignal> out =
        route::replicas_from_endpoints(endpoints, clock_offset_);
    if (scale_) pending_.report(out, scale_->spec_replicas, now_(), std::nullopt);
    return out;
  }

  void apply(const scale::Decision& d) override {
    if (!scale_ || d.desired_replicas == scale_->spec_replicas) return;
    auto s = client_.set_replicas(target_, d.desired_replicas);
    if (!s) {
      warn(s.error());
      return;
    }
    spdlog::info("pool {}: {} spec.replicas {} -> {}", name_, target_.name, scale_->spec_replicas,
                 d.desired_replicas);
    // The drained ones leave our count first; Kubernetes picks the pods it removes (and
    // discovery drains each as its pod starts terminating).
    for (const std::string& id : d.drain) {
      std::erase_if(pods_, [&](const scale::ReplicaSignal& r) { return r.id == id; });
      pending_.forget(id);
    }
    scale_->spec_replicas = d.desired_replicas;
    reconcile();
  }

 private:
  // Matches our replica list to spec.replicas (new ones starting from now) and counts the
  // oldest status.replicas of them as ready.
  void reconcile() {
    const Nanos t = now_();
    const int32_t spec = std::max(scale_->spec_replicas, 0);
    while (static_cast<int32_t>(pods_.size()) < spec) {
      pods_.push_back({.id = fmt::format("{}-{}", target_.name, next_id_++),
                       .phase = scale::ReplicaPhase::kStarting,
                       .launched_at = t});
    }
    while (static_cast<int32_t>(pods_.size()) > spec) pods_.pop_back();
    const int32_t ready = std::min(scale_->status_replicas, spec);
    for (int32_t i = 0; i < static_cast<int32_t>(pods_.size()); ++i) {
      scale::ReplicaSignal& r = pods_[static_cast<size_t>(i)];
      if (i < ready && r.phase == scale::ReplicaPhase::kStarting) {
        r.phase = scale::ReplicaPhase::kReady;
        r.ready_at = t;
      }
    }
  }

  void warn(const std::string& error) {
    const Nanos t = now_();
    if (t - last_warning_ < 30 * kSecond) return;
    last_warning_ = t;
    spdlog::warn("pool {}: {}", name_, error);
  }

  static bool discovers_from_kubernetes(const PoolConfig& pool) {
    if (!pool.discovery) return false;
    return std::ranges::any_of(pool.discovery->sources, [](const discovery::SourceConfig& s) {
      return s.kind == "kubernetes";
    });
  }

  io::KubeScaleClient client_;
  io::KubeTarget target_;
  std::string name_;
  std::function<Nanos()> now_;
  Nanos clock_offset_;
  bool discovered_;
  PendingAsks pending_;
  std::optional<io::ScaleState> scale_;
  std::vector<scale::ReplicaSignal> pods_;
  uint64_t next_id_ = 0;
  Nanos last_warning_ = -3600 * kSecond;
};

Result<std::unique_ptr<Actuator>> make_kubernetes_actuator(const KubernetesReplicaConfig& k,
                                                           ActuatorContext context) {
  io::KubeTarget target = k.target;
  io::KubeConfig config;
  if (!k.kubeconfig.empty()) {
    auto file = io::load_kubeconfig(k.kubeconfig);
    if (!file) return Error("kubernetes actuator: " + file.error());
    config = std::move(file->connection);
    if (target.ns.empty()) target.ns = file->ns;
  } else if (!k.api_server.empty()) {
    auto url = io::parse_url(k.api_server);
    if (!url) return Error("kubernetes actuator: api_server: " + url.error());
    config.host = url->host;
    config.port = static_cast<uint16_t>(std::stoi(url->port));
    config.tls = false;
  } else {
    auto in_cluster = io::in_cluster_config();
    if (!in_cluster) return Error("kubernetes actuator: " + in_cluster.error());
    config = std::move(*in_cluster);
  }
  if (target.ns.empty()) {
    auto ns = io::in_cluster_namespace();
    if (!ns) return Error("kubernetes actuator: set namespace (" + ns.error() + ")");
    target.ns = *ns;
  }
  return std::unique_ptr<Actuator>(
      new KubernetesActuator(std::move(config), std::move(target), std::move(context)));
}

}  // namespace

Result<std::unique_ptr<Actuator>> make_actuator(const PoolAutoscaleConfig& config,
                                                ActuatorContext context) {
  switch (config.actuator) {
    case ActuatorKind::kNone:
      return std::unique_ptr<Actuator>(new ExportOnlyActuator(
          context.clock_offset, config.policy.startup_time, std::move(context.now)));
    case ActuatorKind::kLocal: {
      auto now = context.now;
      auto local = std::make_unique<LocalActuator>(config.local, std::move(context));
      if (Status s = local->start(config.local, std::move(now)); !s) return Error(s.error());
      return std::unique_ptr<Actuator>(std::move(local));
    }
    case ActuatorKind::kKubernetes:
      return make_kubernetes_actuator(config.kubernetes, std::move(context));
  }
  return Error("unknown actuator");
}

}  // namespace kvgate::gateway
