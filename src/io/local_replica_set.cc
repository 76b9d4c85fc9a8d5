#include "io/local_replica_set.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "env/system_clock.h"
#include "io/health_probe.h"
#include "io/subprocess.h"

namespace kvgate::io {

enum class Phase { kStarting, kReady, kDraining };

struct LocalReplicaSet::Replica {
  std::string id;
  uint16_t port = 0;
  std::string url;
  Url health;
  std::unique_ptr<Subprocess> process;
  Phase phase = Phase::kStarting;
  Nanos launched_at = 0;
  Nanos ready_at = 0;
  Nanos draining_since = 0;
};

Result<uint16_t> pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) return Error("cannot bind a loopback port");
  return ntohs(addr.sin_port);
}

Result<std::unique_ptr<LocalReplicaSet>> LocalReplicaSet::make(LocalReplicaSetOptions options) {
  if (options.command.empty()) return Error("local actuator: empty command");
  return std::unique_ptr<LocalReplicaSet>(new LocalReplicaSet(std::move(options)));
}

LocalReplicaSet::LocalReplicaSet(LocalReplicaSetOptions options) : options_(std::move(options)) {
  if (!options_.now) options_.now = [] { return env::system_clock().now(); };
}

LocalReplicaSet::~LocalReplicaSet() {
  for (auto& r : replicas_) {
    if (r->process) r->process->stop(options_.stop_grace);
  }
}

Nanos LocalReplicaSet::now() const { return options_.now(); }

namespace {

std::string substitute(std::string arg, const std::string& key, const std::string& value) {
  for (size_t at = arg.find(key); at != std::string::npos; at = arg.find(key, at + value.size()))
    arg.replace(at, key.size(), value);
  return arg;
}

}  // namespace

Status LocalReplicaSet::launch_one() {
  auto port = pick_free_port();
  if (!port) return Error(port.error());
  auto r = std::make_unique<Replica>();
  r->id = "replica-" + std::to_string(next_id_++);
  r->port = *port;
  r->url = "http://" + options_.host + ":" + std::to_string(*port);
  auto health = parse_url(r->url + options_.health_path);
  if (!health) return Error(health.error());
  r->health = *health;
  SubprocessOptions so;
  for (const std::string& a : options_.command) {
    so.argv.push_back(substitute(substitute(a, "{port}", std::to_string(*port)), "{id}", r->id));
  }
  if (options_.on_output) {
    so.on_line = [cb = options_.on_output, id = r->id](const OutputLine& l) { cb(id, l.text); };
  }
  auto child = Subprocess::spawn(std::move(so));
  if (!child) return Error(r->id + ": " + child.error());
  r->process = std::move(*child);
  r->launched_at = now();
  replicas_.push_back(std::move(r));
  return {};
}

Status LocalReplicaSet::launch(int32_t n) {
  Status first;
  for (int32_t i = 0; i < n; ++i) {
    Status s = launch_one();
    if (!s && first) first = s;
  }
  return first;
}

Status LocalReplicaSet::apply(const scale::Decision& d) {
  for (const std::string& id : d.drain) {
    for (auto& r : replicas_) {
      if (r->id != id || r->phase == Phase::kDraining) continue;
      if (r->phase == Phase::kStarting) {
        stop_replica(*r);  // never registered: nothing to drain
      } else {
        r->phase = Phase::kDraining;
        r->draining_since = now();
        if (options_.on_change) options_.on_change({ReplicaChange::Kind::kDraining, r->id, r->url});
      }
    }
  }
  std::erase_if(replicas_, [](const auto& r) { return r->process == nullptr; });
  int32_t active = 0;
  for (const auto& r : replicas_) active += r->phase != Phase::kDraining;
  return launch(d.desired_replicas - active);
}

void LocalReplicaSet::stop_replica(Replica& r) {
  if (r.process) r.process->stop(options_.stop_grace);
  r.process.reset();
  if (r.phase != Phase::kStarting && options_.on_change) {
    options_.on_change({ReplicaChange::Kind::kRemoved, r.id, r.url});
  }
}

void LocalReplicaSet::poll() {
  int32_t crashed = 0;
  const Nanos t = now();
  for (auto& r : replicas_) {
    if (auto status = r->process->poll()) {
      // Exited on its own: deregister it and replace it (unless it was draining anyway).
      const bool was_draining = r->phase == Phase::kDraining;
      r->process.reset();
      if (r->phase != Phase::kStarting && options_.on_change) {
        options_.on_change({ReplicaChange::Kind::kRemoved, r->id, r->url, !was_draining});
      }
      if (!was_draining) ++crashed;
      continue;
    }
    switch (r->phase) {
      case Phase::kStarting:
        if (probe_health(r->health, options_.probe_timeout) == 200) {
          r->phase = Phase::kReady;
          r->ready_at = now();
          if (options_.on_change) options_.on_change({ReplicaChange::Kind::kReady, r->id, r->url});
        } else if (t - r->launched_at > options_.startup_timeout.count() * kMillisecond) {
          stop_replica(*r);
          ++crashed;
        }
        break;
      case Phase::kDraining: {
        const uint32_t left = options_.in_flight ? options_.in_flight(r->id) : 0;
        if (left == 0 || t - r->draining_since > options_.drain_timeout.count() * kMillisecond) {
          stop_replica(*r);
        }
        break;
      }
      case Phase::kReady:
        break;
    }
  }
  std::erase_if(replicas_, [](const auto& r) { return r->process == nullptr; });
  if (options_.restart_crashed && crashed > 0) {
    restarts_ += crashed;
    (void)launch(crashed);
  }
}

std::vector<scale::ReplicaSignal> LocalReplicaSet::replicas() const {
  std::vector<scale::ReplicaSignal> out;
  for (const auto& r : replicas_) {
    scale::ReplicaSignal s;
    s.id = r->id;
    s.phase = r->phase == Phase::kStarting ? scale::ReplicaPhase::kStarting
              : r->phase == Phase::kReady  ? scale::ReplicaPhase::kReady
                                           : scale::ReplicaPhase::kDraining;
    s.launched_at = r->launched_at;
    s.ready_at = r->ready_at;
    s.in_flight =
        options_.in_flight && r->phase != Phase::kStarting ? options_.in_flight(r->id) : 0;
    out.push_back(std::move(s));
  }
  return out;
}

int LocalReplicaSet::pid(const std::string& id) const {
  for (const auto& r : replicas_) {
    if (r->id == id && r->process) return r->process->pid();
  }
  return -1;
}

size_t LocalReplicaSet::ready() const {
  return static_cast<size_t>(std::count_if(
      replicas_.begin(), replicas_.end(), [](const auto& r) { return r->phase == Phase::kReady; }));
}

}  // namespace kvgate::io
