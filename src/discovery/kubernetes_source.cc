#include "discovery/kubernetes_source.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <fstream>
#include <sstream>

#include "discovery/k8s_objects.h"

namespace kvgate::discovery {
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

// The Status object of an error answer: its code and message.
std::pair<int64_t, std::string> status_of(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return {0, std::string(body.substr(0, 200))};
  const json::object& o = v.as_object();
  int64_t code = 0;
  if (const json::value* c = o.if_contains("code"); c && c->is_int64()) code = c->as_int64();
  std::string message;
  if (const json::value* m = o.if_contains("message"); m && m->is_string()) {
    message = std::string(m->as_string());
  }
  return {code, message};
}

// The connection and namespace start() uses: `kubeconfig:` when given, else the pod's
// service account. Errors: what start() refuses with, word for word.
Result<io::Kubeconfig> load_credentials(const KubernetesSourceConfig& config) {
  io::Kubeconfig out;
  if (!config.kubeconfig.empty()) {
    auto k = io::load_kubeconfig(config.kubeconfig);
    if (!k) return Error(k.error());
    out = std::move(*k);
  } else {
    const io::InClusterPaths paths{
        .token = config.token_file, .ca = config.ca_file, .ns = config.namespace_file};
    auto c = io::in_cluster_config(paths);
    if (!c) return Error(c.error() + " (or give discovery a kubeconfig)");
    out.connection = std::move(*c);
    if (config.ns.empty()) {
      if (auto n = io::in_cluster_namespace(paths)) out.ns = *n;
    }
  }
  if (!config.ns.empty()) out.ns = config.ns;
  if (out.ns.empty()) out.ns = "default";
  return out;
}

}  // namespace

KubernetesSource::KubernetesSource(KubernetesSourceConfig config, SourceSink& sink)
    : config_(std::move(config)), sink_(sink) {}

KubernetesSource::~KubernetesSource() { stop(); }

Status KubernetesSource::check(const KubernetesSourceConfig& config) {
  Result<io::Kubeconfig> credentials = load_credentials(config);
  if (!credentials) return Error(credentials.error());
  return {};
}

Status KubernetesSource::start() {
  Result<io::Kubeconfig> credentials = load_credentials(config_);
  if (!credentials) return Error(credentials.error());
  io::KubeConfig connection = std::move(credentials->connection);
  connection.timeout = config_.timeout;
  ns_ = credentials->ns;
  if (pool_mode()) {
    // path_ and ports_ come from the pool once it has been read.
    pool_client_ = std::make_unique<io::KubeClient>(connection);
  } else {
    path_ = list_path(config_, ns_);
  }
  client_ = std::make_unique<io::KubeClient>(std::move(connection));
  thread_ = std::thread([this] { run(); });
  if (pool_mode()) pool_thread_ = std::thread([this] { run_pool(); });
  return {};
}

void KubernetesSource::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (client_) client_->cancel();
  if (pool_client_) pool_client_->cancel();
  if (thread_.joinable()) thread_.join();
  if (pool_thread_.joinable()) pool_thread_.join();
}

bool KubernetesSource::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stopping_; });
}

void KubernetesSource::report(bool resync) {
  std::vector<DiscoveredEndpoint> set;
  for (const auto& [name, endpoints] : objects_) {
    set.insert(set.end(), endpoints.begin(), endpoints.end());
  }
  sink_.report(std::move(set), resync);
}

std::vector<DiscoveredEndpoint> KubernetesSource::endpoints_of(const json::value& object) const {
  if (config_.mode == KubernetesSourceConfig::Mode::kPods) {
    // A pod whose data-parallel annotation is not a size is left out; say why, each time
    // it is read (on the status page and in kvgate_discovery_errors_total).
    if (Result<uint32_t> size = pod_data_parallel_size(object, config_); !size) {
      spdlog::warn("discovery: kubernetes {}", size.error());
      sink_.error("kubernetes: " + size.error());
    }
  }
  if (pool_mode()) return pod_endpoints(object, config_, ports_);
  return config_.mode == KubernetesSourceConfig::Mode::kPods ? pod_endpoints(object, config_)
                                                             : slice_endpoints(object, config_);
}

bool KubernetesSource::list(bool resync) {
  auto reply = client_->get(path_);
  if (!reply) {
    if (!reselect_due()) sink_.error(reply.error());  // else: interrupted for the new spec
    return false;
  }
  if (reply->status != 200) {
    auto [code, message] = status_of(reply->body);
    sink_.error(fmt::format("kubernetes: LIST {} -> {}: {}", path_, reply->status, message));
    return false;
  }
  boost::system::error_code ec;
  json::value v = json::parse(reply->body, ec);
  if (ec || !v.is_object()) {
    sink_.error(fmt::format("kubernetes: LIST {}: not a JSON object", path_));
    return false;
  }
  const json::object& o = v.as_object();
  std::map<std::string, std::vector<DiscoveredEndpoint>> objects;
  if (const json::value* items = o.if_contains("items"); items && items->is_array()) {
    for (const json::value& item : items->as_array()) {
      objects[object_name(item)] = endpoints_of(item);
    }
  }
  objects_ = std::move(objects);
  resource_version_ = object_resource_version(v);
  report(resync);
  return true;
}

KubernetesSource::WatchEnd KubernetesSource::watch(Clock::time_point resync_at) {
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(resync_at - Clock::now());
  const int64_t timeout_s = std::max<int64_t>(
      1, std::min<int64_t>(
             left.count() + 1,
             std::chrono::duration_cast<std::chrono::seconds>(config_.watch_timeout).count()));
  const std::string target =
      fmt::format("{}&watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds={}", path_,
                  resource_version_, timeout_s);
  bool relist = false;
  auto result = client_->watch(target, resync_at, [&](std::string_view line) {
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) {
      sink_.error("kubernetes: WATCH: an event that is not JSON");
      relist = true;
      return false;
    }
    const json::object& event = v.as_object();
    std::string type;
    if (const json::value* t = event.if_contains("type"); t && t->is_string()) {
      type = std::string(t->as_string());
    }
    const json::value* object = event.if_contains("object");
    if (!object || !object->is_object()) {
      sink_.error("kubernetes: WATCH: an event without an object");
      relist = true;
      return false;
    }
    if (type == "ERROR") {
      auto [code, message] = status_of(json::serialize(*object));
      if (code == 410) {
        spdlog::info("discovery: kubernetes: watch expired ({}): listing again", message);
      } else {
        sink_.error(fmt::format("kubernetes: WATCH error {}: {}", code, message));
      }
      relist = true;
      return false;
    }
    const std::string rv = object_resource_version(*object);
    if (!rv.empty()) resource_version_ = rv;
    if (type == "BOOKMARK") return true;
    const std::string name = object_name(*object);
    if (type == "ADDED" || type == "MODIFIED") {
      objects_[name] = endpoints_of(*object);
    } else if (type == "DELETED") {
      objects_.erase(name);
    } else {
      sink_.error("kubernetes: WATCH: unknown event type '" + type + "'");
      return true;
    }
    report(false);
    return true;
  });
  {
    std::lock_guard lock(mu_);
    if (stopping_) return WatchEnd::kStopped;
  }
  if (reselect_due()) return WatchEnd::kReselect;
  if (!result) {
    sink_.error(result.error());
    return WatchEnd::kFailed;
  }
  if (relist) return WatchEnd::kRelist;
  if (result->status == 410) {
    spdlog::info("discovery: kubernetes: resourceVersion {} is gone (410): listing again",
                 resource_version_);
    return WatchEnd::kRelist;
  }
  if (result->status != 200) {
    auto [code, message] = status_of(result->error_body);
    sink_.error(fmt::format("kubernetes: WATCH {} -> {}: {}", path_, result->status, message));
    return WatchEnd::kFailed;
  }
  if (result->deadline_reached || Clock::now() >= resync_at) return WatchEnd::kResyncDue;
  // The server ended a healthy watch (its timeoutSeconds): watch again from where we are.
  return WatchEnd::kRewatch;
}

void KubernetesSource::run() {
  bool first = true;
  bool reselected = false;  // the next LIST is of a new spec's pods: not a resync
  while (true) {
    if (pool_mode()) {
      const std::optional<bool> changed = take_target();
      if (!changed) return;
      reselected = reselected || *changed;
    } else {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (!list(/*resync=*/!first && !reselected)) {
      if (reselect_due()) continue;
      if (!sleep_for(config_.backoff)) return;
      continue;
    }
    first = false;
    reselected = false;
    const auto resync_at = Clock::now() + config_.resync;
    // Watch until the resync is due; re-watch from the last resourceVersion when the
    // server closes a healthy watch early.
    while (true) {
      const WatchEnd end = watch(resync_at);
      if (end == WatchEnd::kStopped) return;
      if (end == WatchEnd::kFailed) {
        if (!sleep_for(config_.backoff)) return;
        break;
      }
      if (end == WatchEnd::kRelist || end == WatchEnd::kResyncDue || end == WatchEnd::kReselect) {
        break;
      }
    }
  }
}

// --- inference_pool

std::optional<bool> KubernetesSource::take_target() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return stopping_ || target_.has_value(); });
  if (stopping_) return std::nullopt;
  if (target_generation_ == used_generation_) return false;
  used_generation_ = target_generation_;
  ports_ = target_->ports;
  path_ = pods_list_path(ns_, target_->selector);
  // An interrupt sent for an older spec than this one is not for the calls to come.
  client_->clear_interrupt();
  return true;
}

bool KubernetesSource::reselect_due() {
  if (!pool_mode()) return false;
  std::lock_guard lock(mu_);
  return target_generation_ != used_generation_;
}

void KubernetesSource::pool_error(const std::string& message) {
  sink_.error(message);
  if (message != last_pool_error_) {
    spdlog::warn("discovery: {}", message);
    last_pool_error_ = message;
  }
}

std::string KubernetesSource::pool_fallback() {
  std::lock_guard lock(mu_);
  return target_ ? "the pods of its last good spec stay followed"
                 : "no endpoints from it until it is read";
}

void KubernetesSource::apply_pool(const json::value& pool) {
  const std::string what =
      fmt::format("kubernetes: InferencePool {}/{}", ns_, config_.inference_pool);
  Result<InferencePoolTarget> t = inference_pool_target(pool);
  if (!t) {
    pool_error(fmt::format("{}: {} ({})", what, t.error(), pool_fallback()));
    return;
  }
  if (!last_pool_error_.empty()) {
    spdlog::info("discovery: {}: readable again", what);
    last_pool_error_.clear();
  }
  std::lock_guard lock(mu_);
  if (target_ && *target_ == *t) return;
  std::string ports;
  for (const uint16_t port : t->ports) ports += (ports.empty() ? "" : ", ") + std::to_string(port);
  spdlog::info("discovery: {}: pods {} at port(s) {}", what, t->selector, ports);
  target_ = std::move(*t);
  ++target_generation_;
  // The pods' thread takes the new spec when its call in progress ends: end it now.
  client_->interrupt();
  cv_.notify_all();
}

KubernetesSource::PoolWatchEnd KubernetesSource::watch_pool(const std::string& resource_version) {
  const int64_t timeout_s = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(config_.watch_timeout).count());
  std::string target =
      fmt::format("{}&watch=1&allowWatchBookmarks=true&timeoutSeconds={}",
                  inference_pool_watch_path(ns_, config_.inference_pool), timeout_s);
  // Without a resourceVersion (the pool was missing, or the one held expired) the server
  // starts with the pool's current state, as an ADDED event: one created meanwhile
  // arrives. Re-reading the object would not do after a 410: a GET gives the object's
  // own resourceVersion, which is as old as its last change.
  if (!resource_version.empty()) target += "&resourceVersion=" + resource_version;
  const std::string what =
      fmt::format("kubernetes: InferencePool {}/{}", ns_, config_.inference_pool);
  bool failed = false;
  bool expired = false;
  auto result = pool_client_->watch(
      target, Clock::now() + config_.watch_timeout + config_.timeout, [&](std::string_view line) {
        boost::system::error_code ec;
        json::value v = json::parse(line, ec);
        const json::object* event = !ec && v.is_object() ? &v.as_object() : nullptr;
        const json::value* object = event ? event->if_contains("object") : nullptr;
        if (!object || !object->is_object()) {
          sink_.error(what + ": WATCH: an event that is not a JSON object with an object");
          failed = true;
          return false;
        }
        std::string type;
        if (const json::value* t = event->if_contains("type"); t && t->is_string()) {
          type = std::string(t->as_string());
        }
        if (type == "ERROR") {
          auto [code, message] = status_of(json::serialize(*object));
          if (code == 410) {
            spdlog::info("discovery: {}: watch expired ({}): watching its current state", what,
                         message);
            expired = true;
          } else {
            sink_.error(fmt::format("{}: WATCH error {}: {}", what, code, message));
            failed = true;
          }
          return false;
        }
        const std::string rv = object_resource_version(*object);
        if (!rv.empty()) pool_resource_version_ = rv;
        if (type == "BOOKMARK") return true;
        if (object_name(*object) != config_.inference_pool) return true;  // not ours
        if (type == "ADDED" || type == "MODIFIED") {
          apply_pool(*object);
        } else if (type == "DELETED") {
          pool_error(fmt::format("{}: deleted ({})", what, pool_fallback()));
        } else {
          sink_.error(what + ": WATCH: unknown event type '" + type + "'");
        }
        return true;
      });
  {
    std::lock_guard lock(mu_);
    if (stopping_) return PoolWatchEnd::kStopped;
  }
  if (!result) {
    sink_.error(result.error());
    return PoolWatchEnd::kFailed;
  }
  if (failed) return PoolWatchEnd::kFailed;
  if (expired || result->status == 410) return PoolWatchEnd::kExpired;
  if (result->status != 200) {
    auto [code, message] = status_of(result->error_body);
    sink_.error(fmt::format("{}: WATCH -> {}: {}", what, result->status, message));
    return PoolWatchEnd::kFailed;
  }
  return PoolWatchEnd::kRewatch;
}

void KubernetesSource::run_pool() {
  const std::string path = inference_pool_path(ns_, config_.inference_pool);
  const std::string what =
      fmt::format("kubernetes: InferencePool {}/{}", ns_, config_.inference_pool);
  bool get = true;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (get) {
      auto reply = pool_client_->get(path);
      if (!reply) {
        pool_error(reply.error());
        if (!sleep_for(config_.backoff)) return;
        continue;
      }
      if (reply->status == 404) {
        pool_error(fmt::format("{}: not found (GET {} -> 404; {})", what, path, pool_fallback()));
        pool_resource_version_.clear();  // watch from the pool's current state
      } else if (reply->status != 200) {
        auto [code, message] = status_of(reply->body);
        pool_error(fmt::format("{}: GET {} -> {}: {}", what, path, reply->status, message));
        if (!sleep_for(config_.backoff)) return;
        continue;
      } else {
        boost::system::error_code ec;
        json::value v = json::parse(reply->body, ec);
        if (ec || !v.is_object()) {
          pool_error(fmt::format("{}: GET {}: not a JSON object", what, path));
          if (!sleep_for(config_.backoff)) return;
          continue;
        }
        apply_pool(v);
        pool_resource_version_ = object_resource_version(v);
      }
      get = false;
    }
    const std::string from = pool_resource_version_;  // the watch's events move it on
    switch (watch_pool(from)) {
      case PoolWatchEnd::kStopped:
        return;
      case PoolWatchEnd::kFailed:
        if (!sleep_for(config_.backoff)) return;
        get = true;
        break;
      case PoolWatchEnd::kExpired:
        if (from.empty()) {  // not expected of a server: do not spin on it
          if (!sleep_for(config_.backoff)) return;
          get = true;
        }
        pool_resource_version_.clear();
        break;
      case PoolWatchEnd::kRewatch:
        break;
    }
  }
}

}  // namespace kvgate::discovery
