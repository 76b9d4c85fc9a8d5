#include "gateway/common/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include "core/common/yaml_reader.h"
#include "core/route/config_yaml.h"
#include "core/route/data_parallel.h"
#include "core/route/router.h"
#include "discovery/endpoint_list.h"
#include "env/file.h"
#include "gateway/common/flow_config.h"
#include "io/http_types.h"
#include "io/tls_context.h"

namespace kvgate::gateway {
namespace {

std::filesystem::path directory_of(std::string_view file) {
  std::filesystem::path p(file);
  return p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
}

// The config's reader: the YAML helpers (fail, only_keys, text, integer, ...) are the one
// reader's (core/common/yaml_reader.h), which throw YamlError inside the parser only (it
// never escapes parse_gateway_config).
class Parser : public YamlReader {
 public:
  explicit Parser(std::string_view file) : YamlReader(file, directory_of(file).string()) {}

  // The text under `key` of the mapping `map` (named `field`), which must be there ("missing"
  // otherwise) and, with `non_empty`, not be "" ("empty").
  std::string required_text(const YAML::Node& map, const std::string& field, const char* key,
                            bool non_empty = false) const {
    const std::string at = field + "." + key;
    if (!map[key]) fail(map, at, "missing");
    std::string value = text(map[key], at);
    if (non_empty && value.empty()) fail(map[key], at, "empty");
    return value;
  }

  // Durations in whole milliseconds, up to a day.
  std::chrono::milliseconds millis(const YAML::Node& node, std::string_view field) const {
    return std::chrono::milliseconds(integer(node, field, 1, 24LL * 3600 * 1000));
  }

  void rate_limits(const YAML::Node& n, RateLimitConfig& r) const {
    only_keys(n, "rate_limits", {"store", "redis", "on_store_failure"});
    using Store = RateLimitConfig::Store;
    if (auto v = n["store"]) {
      r.store = choice<Store>(v, "rate_limits.store",
                              {{"memory", Store::kMemory}, {"redis", Store::kRedis}});
    }
    if (auto v = n["on_store_failure"]) {
      r.fail_closed = choice<bool>(v, "rate_limits.on_store_failure",
                                   {{"fail-open", false}, {"fail-closed", true}});
    }
    if (auto v = n["redis"]) redis(v, "rate_limits.redis", r.redis);
  }

  void redis(const YAML::Node& v, std::string_view field, RedisConfig& r) const {
    const std::string f(field);
    only_keys(v, f, {"host", "port", "password", "timeout_ms"});
    if (auto h = v["host"]) {
      r.host = text(h, f + ".host");
      if (r.host.empty()) fail(h, f + ".host", "empty host");
    }
    if (auto p = v["port"]) r.port = static_cast<uint16_t>(integer(p, f + ".port", 1, 65535));
    if (auto p = v["password"]) r.password = text(p, f + ".password");
    if (auto t = v["timeout_ms"]) r.timeout = millis(t, f + ".timeout_ms");
  }

  ClusterConfig cluster(const YAML::Node& n) const {
    ClusterConfig c;
    only_keys(n, "cluster",
              {"redis", "replica_id", "sync", "stream_prefix", "flush_ms", "flush_max_ms",
               "flush_batch", "poll_ms", "max_len", "replay_ms", "peer_timeout_ms", "lease_ms",
               "snapshot_ms", "fleet_fairness", "sync_mode", "cycle_idle_max_ms", "cycle_replies"});
    if (auto v = n["redis"]) redis(v, "cluster.redis", c.redis);
    if (auto v = n["replica_id"]) {
      c.replica_id = text(v, "cluster.replica_id");
      if (c.replica_id.empty()) fail(v, "cluster.replica_id", "empty replica id");
    }
    // YAML reads a bare on/off as a boolean: accept both spellings.
    auto on_off = [&](const YAML::Node& v, const std::string& field) {
      const std::string s = text(v, field);
      if (s == "on" || s == "true") return true;
      if (s == "off" || s == "false") return false;
      fail(v, field, fmt::format("expected on or off, got '{}'", s));
    };
    if (auto v = n["sync"]) c.sync = on_off(v, "cluster.sync");
    if (auto v = n["fleet_fairness"]) c.fleet_fairness = on_off(v, "cluster.fleet_fairness");
    if (auto v = n["stream_prefix"]) c.stream_prefix = text(v, "cluster.stream_prefix");
    if (auto v = n["flush_ms"]) c.flush = millis(v, "cluster.flush_ms");
    // The longest an own event waits to be published: at least one check period. Left
    // out, a config written before it (flush_ms above 25, say) keeps its flush_ms.
    if (auto v = n["flush_max_ms"]) {
      c.flush_max = millis(v, "cluster.flush_max_ms");
      if (c.flush_max < c.flush) {
        fail(v, "cluster.flush_max_ms",
             fmt::format("must be at least flush_ms ({})", c.flush.count()));
      }
    } else {
      c.flush_max = std::max(c.flush_max, c.flush);
    }
    if (auto v = n["flush_batch"]) {
      c.flush_batch = static_cast<uint32_t>(integer(v, "cluster.flush_batch", 1, 1'000'000));
    }
    // 0: a read that brought entries is followed by the next at once (replica_sync.h).
    if (auto v = n["poll_ms"]) {
      c.poll = std::chrono::milliseconds(integer(v, "cluster.poll_ms", 0, 24LL * 3600 * 1000));
    }
    using SyncMode = ClusterConfig::SyncMode;
    using CycleReplies = ClusterConfig::CycleReplies;
    if (auto v = n["sync_mode"]) {
      c.sync_mode = choice<SyncMode>(
          v, "cluster.sync_mode", {{"blocking", SyncMode::kBlocking}, {"cycle", SyncMode::kCycle}});
    }
    if (auto v = n["cycle_replies"]) {
      c.cycle_replies = choice<CycleReplies>(
          v, "cluster.cycle_replies",
          {{"deferred", CycleReplies::kDeferred}, {"prompt", CycleReplies::kPrompt}});
    }
    // Cycle mode's longest idle wait: at least the tick (flush_max_ms). Left out, a config
    // with a flush_max_ms above 100 keeps a fixed tick.
    if (auto v = n["cycle_idle_max_ms"]) {
      c.cycle_idle_max = millis(v, "cluster.cycle_idle_max_ms");
      if (c.cycle_idle_max < c.flush_max) {
        fail(v, "cluster.cycle_idle_max_ms",
             fmt::format("must be at least flush_max_ms ({})", c.flush_max.count()));
      }
    } else {
      c.cycle_idle_max = std::max(c.cycle_idle_max, c.flush_max);
    }
    if (auto v = n["max_len"]) c.max_len = integer(v, "cluster.max_len", 100, 100'000'000);
    if (auto v = n["replay_ms"]) c.replay = millis(v, "cluster.replay_ms");
    if (auto v = n["peer_timeout_ms"]) c.peer_timeout = millis(v, "cluster.peer_timeout_ms");
    if (auto v = n["lease_ms"]) c.lease = millis(v, "cluster.lease_ms");
    if (auto v = n["snapshot_ms"]) {
      c.snapshot =
          std::chrono::milliseconds(integer(v, "cluster.snapshot_ms", 0, 24LL * 3600 * 1000));
    }
    return c;
  }

  GatewayConfig parse(const YAML::Node& root) {
    GatewayConfig c;
    c.file = file();
    only_keys(root, "config",
              {"listeners", "keys_file", "timeouts", "limits", "retries", "circuit_breaker",
               "rate_limits", "cluster", "threads", "admin", "tracing", "epp", "pools", "models",
               "adapters"});
    if (auto n = root["listeners"]) {
      if (!n.IsSequence() || n.size() == 0) fail(n, "listeners", "expected a non-empty list");
      for (size_t i = 0; i < n.size(); ++i) {
        c.listeners.push_back(listener(n[i], fmt::format("listeners[{}]", i)));
      }
    } else {
      c.listeners.push_back(ListenerConfig{});
    }
    if (auto n = root["keys_file"]) c.keys_file = path(n, "keys_file");
    if (auto n = root["threads"]) c.threads = static_cast<int>(integer(n, "threads", 1, 256));
    if (auto n = root["timeouts"]) timeouts(n, c.timeouts);
    if (auto n = root["limits"]) {
      only_keys(n, "limits", {"max_header_bytes", "max_body_bytes"});
      if (auto v = n["max_header_bytes"]) {
        c.limits.max_header_bytes = integer(v, "limits.max_header_bytes", 1024, 1 << 20);
      }
      if (auto v = n["max_body_bytes"]) {
        c.limits.max_body_bytes = integer(v, "limits.max_body_bytes", 1024, 1LL << 30);
      }
    }
    if (auto n = root["retries"]) {
      only_keys(n, "retries", {"max_attempts"});
      if (auto v = n["max_attempts"]) {
        c.retries.max_attempts = static_cast<int>(integer(v, "retries.max_attempts", 1, 16));
      }
    }
    if (auto n = root["rate_limits"]) rate_limits(n, c.rate_limits);
    if (auto n = root["cluster"]) c.cluster = cluster(n);
    if (auto n = root["admin"]) c.admin = admin(n);
    if (auto n = root["tracing"]) c.tracing = tracing(n);
    if (auto n = root["epp"]) c.epp = epp(n);
    if (auto n = root["circuit_breaker"]) {
      only_keys(n, "circuit_breaker", {"failures", "open_ms"});
      if (auto v = n["failures"]) {
        c.breaker.failures = static_cast<uint32_t>(integer(v, "circuit_breaker.failures", 1, 1000));
      }
      if (auto v = n["open_ms"]) {
        c.breaker.open_for = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 millis(v, "circuit_breaker.open_ms"))
                                 .count();
      }
    }
    YAML::Node pools = root["pools"];
    if (!pools || !pools.IsMap() || pools.size() == 0) {
      fail(pools ? pools : root, "pools", "expected a mapping of pool name to pool");
    }
    for (const auto& kv : pools) {
      c.pools.push_back(pool(kv.first.as<std::string>(), kv.second));
    }
    YAML::Node models = root["models"];
    if (!models || !models.IsSequence() || models.size() == 0) {
      fail(models ? models : root, "models", "expected a non-empty list of models");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < models.size(); ++i) {
      std::string field = fmt::format("models[{}]", i);
      const YAML::Node& m = models[i];
      only_keys(m, field, {"name", "aliases", "pool", "served_name"});
      ModelConfig model;
      model.name = required_text(m, field, "name", /*non_empty=*/true);
      if (m["aliases"]) model.aliases = strings(m["aliases"], field + ".aliases");
      model.pool = required_text(m, field, "pool");
      if (!c.find_pool(model.pool)) {
        fail(m["pool"], field + ".pool", fmt::format("no pool named '{}'", model.pool));
      }
      model.served_name =
          m["served_name"] ? text(m["served_name"], field + ".served_name") : model.name;
      if (!names.insert(model.name).second) {
        fail(m["name"], field + ".name", fmt::format("'{}' is defined twice", model.name));
      }
      for (size_t a = 0; a < model.aliases.size(); ++a) {
        if (!names.insert(model.aliases[a]).second) {
          fail(m["aliases"][a], fmt::format("{}.aliases[{}]", field, a),
               fmt::format("'{}' is defined twice", model.aliases[a]));
        }
      }
      c.models.push_back(std::move(model));
    }
    if (YAML::Node adapters = root["adapters"]) {
      if (!adapters.IsSequence()) fail(adapters, "adapters", "expected a list of adapters");
      for (size_t i = 0; i < adapters.size(); ++i) {
        std::string field = fmt::format("adapters[{}]", i);
        const YAML::Node& a = adapters[i];
        only_keys(a, field, {"name", "base", "source", "max_replicas"});
        ModelConfig model;
        model.name = required_text(a, field, "name", /*non_empty=*/true);
        model.base = required_text(a, field, "base");
        const ModelConfig* base = nullptr;
        for (const ModelConfig& m : c.models) {
          if (m.name == model.base && m.base.empty()) base = &m;
        }
        if (!base) {
          fail(a["base"], field + ".base",
               fmt::format("no model named '{}' (an adapter's base is a model of `models:`)",
                           model.base));
        }
        model.pool = base->pool;
        model.served_name = model.name;  // engines serve an adapter under its own name
        if (a["source"]) model.adapter_source = text(a["source"], field + ".source");
        if (const PoolConfig* pool = c.find_pool(model.pool);
            pool && pool->lora_placement.enabled && model.adapter_source.empty()) {
          fail(a["source"] ? a["source"] : a, field + ".source",
               fmt::format("missing: pool {} places its adapters (lora_placement), and loads "
                           "them from their source",
                           model.pool));
        }
        if (auto v = a["max_replicas"]) {
          model.max_replicas =
              static_cast<uint32_t>(integer(v, field + ".max_replicas", 1, 100'000));
        }
        if (!names.insert(model.name).second) {
          fail(a["name"], field + ".name", fmt::format("'{}' is defined twice", model.name));
        }
        c.models.push_back(std::move(model));
      }
    }
    return c;
  }

  TracingConfig tracing(const YAML::Node& n) const {
    only_keys(n, "tracing",
              {"ratio", "collector", "service_name", "batch_size", "max_queue", "flush_ms"});
    TracingConfig t;
    if (auto v = n["ratio"]) {
      t.ratio = number(v, "tracing.ratio");
      if (!(t.ratio >= 0.0 && t.ratio <= 1.0)) {
        fail(v, "tracing.ratio", fmt::format("expected 0.0 to 1.0, got {}", t.ratio));
      }
    }
    t.collector = required_text(n, "tracing", "collector");
    if (!t.collector.starts_with("http://") || !io::parse_url(t.collector)) {
      fail(n["collector"], "tracing.collector",
           fmt::format("expected http://host:port/v1/traces, got '{}'", t.collector));
    }
    if (auto v = n["service_name"]) {
      t.service_name = text(v, "tracing.service_name");
      if (t.service_name.empty()) fail(v, "tracing.service_name", "empty name");
    }
    if (auto v = n["batch_size"]) {
      t.batch_size = static_cast<size_t>(integer(v, "tracing.batch_size", 1, 100'000));
    }
    if (auto v = n["max_queue"]) {
      t.max_queue = static_cast<size_t>(integer(v, "tracing.max_queue", 1, 10'000'000));
    }
    if (auto v = n["flush_ms"]) t.flush = millis(v, "tracing.flush_ms");
    if (t.max_queue < t.batch_size) {
      fail(n, "tracing.max_queue", fmt::format("must be at least batch_size ({})", t.batch_size));
    }
    return t;
  }

  EppConfig epp(const YAML::Node& n) const {
    only_keys(n, "epp",
              {"address", "port", "objectives", "max_fairness_ids", "fallbacks", "tls",
               "health_port", "threads"});
    EppConfig e;
    if (auto v = n["address"]) {
      e.address = text(v, "epp.address");
      if (e.address.empty()) fail(v, "epp.address", "empty address");
    }
    if (auto v = n["port"]) e.port = static_cast<uint16_t>(integer(v, "epp.port", 0, 65535));
    if (auto v = n["objectives"]) {
      if (!v.IsMap()) fail(v, "epp.objectives", "expected a mapping of names to priorities");
      for (const auto& kv : v) {
        const std::string name = text(kv.first, "epp.objectives");
        if (name.empty()) fail(kv.first, "epp.objectives", "empty objective name");
        e.objectives[name] =
            static_cast<int>(integer(kv.second, "epp.objectives." + name, -1'000'000, 1'000'000));
      }
    }
    if (auto v = n["fallbacks"]) {
      e.fallbacks = static_cast<uint8_t>(integer(v, "epp.fallbacks", 0, 4));
    }
    if (auto v = n["max_fairness_ids"]) {
      e.max_fairness_ids = static_cast<uint32_t>(integer(v, "epp.max_fairness_ids", 0, 1'000'000));
    }
    if (auto v = n["threads"]) e.threads = static_cast<uint32_t>(integer(v, "epp.threads", 1, 64));
    if (auto v = n["tls"]) {
      only_keys(v, "epp.tls", {"cert", "key", "self_signed"});
      EppConfig::Tls tls;
      if (auto s = v["self_signed"]) tls.self_signed = boolean(s, "epp.tls.self_signed");
      if (tls.self_signed && (v["cert"] || v["key"])) {
        fail(v, "epp.tls", "give cert and key, or self_signed: true, not both");
      }
      if (!tls.self_signed) tls.files = tls_files(v, "epp.tls");
      e.tls = std::move(tls);
    }
    if (auto v = n["health_port"]) {
      e.health_port = static_cast<uint16_t>(integer(v, "epp.health_port", 0, 65535));
      if (*e.health_port != 0 && *e.health_port == e.port) {
        fail(v, "epp.health_port", fmt::format("{} is epp.port too", e.port));
      }
    }
    return e;
  }

  AdminConfig admin(const YAML::Node& n) const {
    only_keys(n, "admin", {"address", "port", "token", "token_file"});
    AdminConfig a;
    if (auto v = n["address"]) {
      a.address = text(v, "admin.address");
      if (a.address.empty()) fail(v, "admin.address", "empty address");
    }
    if (auto v = n["port"]) a.port = static_cast<uint16_t>(integer(v, "admin.port", 0, 65535));
    if (n["token"] && n["token_file"]) fail(n, "admin", "give token or token_file, not both");
    if (auto v = n["token"]) {
      a.token = text(v, "admin.token");
      if (a.token.empty()) fail(v, "admin.token", "empty token");
    }
    if (auto v = n["token_file"]) {
      a.token_file = path(v, "admin.token_file");
      Result<std::string> token = env::read_file(a.token_file);
      if (!token) fail(v, "admin.token_file", token.error());
      a.token = std::move(*token);
      // A trailing newline (echo > admin.token) is not part of the token.
      while (!a.token.empty() && (a.token.back() == '\n' || a.token.back() == '\r' ||
                                  a.token.back() == ' ' || a.token.back() == '\t')) {
        a.token.pop_back();
      }
      if (a.token.empty()) fail(v, "admin.token_file", a.token_file + " is empty");
    }
    if (a.token.empty() && !is_loopback(a.address)) {
      fail(n["address"], "admin.address",
           fmt::format("{} is not a loopback address: set admin.token or admin.token_file",
                       a.address));
    }
    return a;
  }

  static bool is_loopback(std::string_view address) {
    return address == "localhost" || address == "::1" || address == "[::1]" ||
           address.starts_with("127.");
  }

  ListenerConfig listener(const YAML::Node& n, const std::string& field) const {
    only_keys(n, field, {"address", "port", "tls"});
    ListenerConfig l;
    if (auto v = n["address"]) l.address = text(v, field + ".address");
    if (auto v = n["port"]) l.port = static_cast<uint16_t>(integer(v, field + ".port", 0, 65535));
    if (auto v = n["tls"]) {
      only_keys(v, field + ".tls", {"cert", "key"});
      l.tls = tls_files(v, field + ".tls");
    }
    return l;
  }

  // The `cert` and `key` of the TLS section `v` (named `field`): both given, both files
  // there, loadable and the key the certificate's (io::check_tls_files).
  TlsConfig tls_files(const YAML::Node& v, const std::string& field) const {
    if (!v["cert"]) fail(v, field + ".cert", "missing");
    if (!v["key"]) fail(v, field + ".key", "missing");
    TlsConfig tls{path(v["cert"], field + ".cert"), path(v["key"], field + ".key")};
    for (auto [file, name] : {std::pair{tls.cert_file, "cert"}, {tls.key_file, "key"}}) {
      if (!std::filesystem::exists(file)) {
        fail(v[name], fmt::format("{}.{}", field, name), "no such file: " + file);
      }
    }
    if (Status st = io::check_tls_files({tls.cert_file, tls.key_file}); !st) {
      const std::string& name = st.failure().field;  // "cert" or "key"
      fail(v[name], fmt::format("{}.{}", field, name), st.error());
    }
    return tls;
  }

  void timeouts(const YAML::Node& n, TimeoutConfig& t) const {
    only_keys(n, "timeouts",
              {"header_ms", "idle_ms", "connect_ms", "upstream_header_ms", "stream_ms",
               "stream_idle_ms", "drain_ms", "drain_announce_ms"});
    if (auto v = n["header_ms"]) t.header = millis(v, "timeouts.header_ms");
    if (auto v = n["idle_ms"]) t.idle = millis(v, "timeouts.idle_ms");
    if (auto v = n["connect_ms"]) t.connect = millis(v, "timeouts.connect_ms");
    if (auto v = n["upstream_header_ms"]) {
      t.upstream_header = millis(v, "timeouts.upstream_header_ms");
    }
    if (auto v = n["stream_ms"]) t.stream = millis(v, "timeouts.stream_ms");
    if (auto v = n["stream_idle_ms"]) t.stream_idle = millis(v, "timeouts.stream_idle_ms");
    if (auto v = n["drain_ms"]) t.drain = millis(v, "timeouts.drain_ms");
    if (auto v = n["drain_announce_ms"]) {
      t.drain_announce = millis(v, "timeouts.drain_announce_ms");
    }
  }

  PoolConfig pool(const std::string& name, const YAML::Node& n) const {
    std::string field = "pools." + name;
    only_keys(n, field,
              {"endpoints", "router", "tokenizer", "chat_template", "block_size",
               "scrape_interval_ms", "kv_events_bind", "warmup", "autoscale",
               "trust_request_chat_template", "chat_template_content_format", "discovery",
               "flow_control", "migration", "tokenize", "lora_placement"});
    PoolConfig p;
    p.name = name;
    p.scrape_interval = std::chrono::milliseconds(200);
    if (auto v = n["scrape_interval_ms"]) {
      p.scrape_interval =
          std::chrono::milliseconds(integer(v, field + ".scrape_interval_ms", 50, 1000));
    }
    if (auto v = n["kv_events_bind"]) {
      p.kv_events_bind = text(v, field + ".kv_events_bind");
      if (!discovery::valid_zmq_url(p.kv_events_bind)) {
        fail(v, field + ".kv_events_bind", "expected tcp://host:port");
      }
    }
    if (auto v = n["block_size"]) {
      p.router.block_size = static_cast<uint32_t>(integer(v, field + ".block_size", 1, 4096));
    }
    if (auto v = n["tokenizer"]) {
      p.tokenizer_file = path(v, field + ".tokenizer");
      if (!std::filesystem::exists(p.tokenizer_file)) {
        fail(v, field + ".tokenizer", "no such file: " + p.tokenizer_file);
      }
    }
    if (auto v = n["chat_template"]) {
      p.chat_template_file = path(v, field + ".chat_template");
      if (!std::filesystem::exists(p.chat_template_file)) {
        fail(v, field + ".chat_template", "no such file: " + p.chat_template_file);
      }
    }
    if (auto v = n["trust_request_chat_template"]) {
      p.trust_request_chat_template = boolean(v, field + ".trust_request_chat_template");
    }
    if (auto v = n["chat_template_content_format"]) {
      const std::string f = field + ".chat_template_content_format";
      auto format = tokenizer::parse_content_format(text(v, f));
      if (!format) fail(v, f, "expected auto, string or openai");
      p.chat_template_content_format = *format;
    }
    if (auto t = n["tokenize"]) tokenize(t, field + ".tokenize", p.tokenize);
    if (auto r = n["router"]) router(r, field + ".router", p.router);
    if (auto w = n["warmup"]) warmup(w, field + ".warmup", p);
    if (auto l = n["lora_placement"])
      lora_placement(l, field + ".lora_placement", p.lora_placement);
    if (auto f = n["flow_control"]) {
      auto parsed = parse_pool_flow(f, field + ".flow_control", file());
      if (!parsed) throw YamlError{parsed.error()};
      p.flow = *parsed;
    }
    if (auto m = n["migration"]) {
      only_keys(m, field + ".migration", {"max_migrations"});
      p.max_migrations = 2;
      if (auto v = m["max_migrations"]) {
        p.max_migrations = static_cast<int>(integer(v, field + ".migration.max_migrations", 0, 16));
      }
    }
    if (auto a = n["autoscale"]) {
      auto parsed = parse_pool_autoscale(a, field + ".autoscale", file());
      if (!parsed) throw YamlError{parsed.error()};
      p.autoscale = std::move(*parsed);
      const std::string& config_dir = dir();
      std::string& kubeconfig = p.autoscale->kubernetes.kubeconfig;
      if (!kubeconfig.empty() && std::filesystem::path(kubeconfig).is_relative()) {
        kubeconfig = (std::filesystem::path(dir()) / kubeconfig).string();
      }
      for (std::string& arg : p.autoscale->local.command) {
        for (size_t at = arg.find("{config_dir}"); at != std::string::npos;
             at = arg.find("{config_dir}", at + config_dir.size())) {
          arg.replace(at, 12, config_dir);
        }
      }
    }
    YAML::Node eps = n["endpoints"];
    if (auto d = n["discovery"]) {
      auto parsed = discovery::parse_discovery(d, file(), field + ".discovery", dir(),
                                               !p.kv_events_bind.empty());
      if (!parsed) throw YamlError{parsed.error()};
      p.discovery = std::move(*parsed);
      if (!eps) return p;  // every endpoint is discovered
    }
    if (p.autoscale && p.autoscale->actuator == ActuatorKind::kLocal) {
      // The local actuator launches and registers the pool's replicas itself.
      if (eps) fail(eps, field + ".endpoints", "not used with autoscale.actuator.kind local");
      return p;
    }
    if (!eps || !eps.IsSequence() || eps.size() == 0) {
      fail(eps ? eps : n, field + ".endpoints", "expected a non-empty list of endpoints");
    }
    std::set<std::string> urls;
    for (size_t i = 0; i < eps.size(); ++i) {
      std::string ef = fmt::format("{}.endpoints[{}]", field, i);
      const YAML::Node& e = eps[i];
      route::EndpointSpec spec;
      std::optional<KvEventsConfig> events;
      uint32_t dp_size = 1;  // data-parallel ranks behind the address
      if (e.IsScalar()) {
        spec.url = e.Scalar();
      } else {
        only_keys(e, ef,
                  {"url", "role", "zone", "rack", "labels", "kv_capacity_blocks", "kv_events",
                   "data_parallel_size"});
        if (auto v = e["kv_events"]) events = kv_events(v, ef + ".kv_events", p.kv_events_bind);
        if (auto v = e["data_parallel_size"]) {
          dp_size = discovery::read_data_parallel_size(*this, v, ef, !p.kv_events_bind.empty());
        }
        spec.url = required_text(e, ef, "url");
        if (auto v = e["role"]) {
          auto role = route::parse_role(text(v, ef + ".role"));
          if (!role) fail(v, ef + ".role", "expected both, prefill or decode");
          spec.role = *role;
        }
        if (auto v = e["zone"]) spec.zone = text(v, ef + ".zone");
        if (auto v = e["rack"]) spec.rack = text(v, ef + ".rack");
        if (auto v = e["kv_capacity_blocks"]) {
          spec.kv_capacity_blocks =
              static_cast<uint32_t>(integer(v, ef + ".kv_capacity_blocks", 0, 1LL << 31));
        }
        if (auto v = e["labels"]) {
          if (!v.IsMap()) fail(v, ef + ".labels", "expected a mapping");
          for (const auto& kv : v) {
            spec.labels.emplace_back(kv.first.as<std::string>(), text(kv.second, ef + ".labels"));
          }
        }
      }
      const YAML::Node& at = e.IsScalar() ? e : e["url"];
      // "http://host:port", or one rank of a data-parallel engine: "http://host:port#dpN"
      // (route/data_parallel.h), its KV events given as they are.
      const route::DpUrl dp = route::split_dp_url(spec.url);
      if (dp.rank && dp_size > 1) {
        fail(at, ef, "a rank's URL (#dpN) takes no data_parallel_size");
      }
      if (!discovery::valid_endpoint_url(dp.address)) {
        fail(at, e.IsScalar() ? ef : ef + ".url",
             fmt::format("expected http://host:port, got '{}'", spec.url));
      }
      if (!urls.insert(spec.url).second) {
        fail(at, ef, fmt::format("endpoint '{}' listed twice", spec.url));
      }
      // A data-parallel engine: one endpoint per rank (route/data_parallel.h), each
      // subscribed to its rank's KV event port as vLLM offsets it.
      const std::vector<route::EndpointSpec> ranks = route::expand_data_parallel(spec, dp_size);
      for (uint32_t r = 0; r < ranks.size(); ++r) {
        std::optional<KvEventsConfig> rank_events = events;
        if (rank_events && dp_size > 1) {
          rank_events->publisher = route::dp_rank_zmq_endpoint(events->publisher, r);
          rank_events->replay = route::dp_rank_zmq_endpoint(events->replay, r);
        }
        p.endpoints.push_back(ranks[r]);
        p.kv_events.push_back(std::move(rank_events));
      }
    }
    if (!p.kv_events_bind.empty()) {
      std::set<std::string> topics;
      for (size_t i = 0; i < p.kv_events.size(); ++i) {
        if (p.kv_events[i] && !topics.insert(p.kv_events[i]->topic).second) {
          fail(eps[i]["kv_events"], fmt::format("{}.endpoints[{}].kv_events.topic", field, i),
               fmt::format("topic '{}' used twice (bind mode tells engines apart by topic)",
                           p.kv_events[i]->topic));
        }
      }
    }
    return p;
  }

  TokenizeMode tokenize_mode(const YAML::Node& n, const std::string& field) const {
    return choice<TokenizeMode>(n, field,
                                {{"auto", TokenizeMode::kAuto},
                                 {"local", TokenizeMode::kLocal},
                                 {"engine", TokenizeMode::kEngine}});
  }

  // `tokenize: MODE` or `tokenize: {mode, timeout_ms, cache_mb}`.
  void tokenize(const YAML::Node& n, const std::string& field, TokenizeConfig& t) const {
    if (n.IsScalar()) {
      t.mode = tokenize_mode(n, field);
      return;
    }
    if (!n.IsMap()) fail(n, field, "expected auto, local, engine or a mapping");
    only_keys(n, field, {"mode", "timeout_ms", "cache_mb"});
    if (auto v = n["mode"]) t.mode = tokenize_mode(v, field + ".mode");
    if (auto v = n["timeout_ms"]) {
      t.timeout = std::chrono::milliseconds(integer(v, field + ".timeout_ms", 1, 60'000));
    }
    if (auto v = n["cache_mb"]) {
      t.cache_bytes = static_cast<size_t>(integer(v, field + ".cache_mb", 0, 1 << 20)) << 20;
    }
  }

  void warmup(const YAML::Node& n, const std::string& field, PoolConfig& p) const {
    only_keys(n, field, {"enabled", "prefixes", "budget_ms", "concurrency", "ready_timeout_ms"});
    kv::WarmupConfig& w = p.warmup;
    w.enabled = true;  // a warmup section turns it on unless it says otherwise
    if (auto v = n["enabled"]) w.enabled = boolean(v, field + ".enabled");
    if (auto v = n["prefixes"]) {
      w.prefixes = static_cast<uint32_t>(integer(v, field + ".prefixes", 1, 1024));
    }
    if (auto v = n["budget_ms"]) {
      w.budget = integer(v, field + ".budget_ms", 1, 3'600'000) * kMillisecond;
    }
    if (auto v = n["concurrency"]) {
      w.concurrency = static_cast<uint32_t>(integer(v, field + ".concurrency", 1, 256));
    }
    if (auto v = n["ready_timeout_ms"]) {
      p.warmup_ready_timeout = millis(v, field + ".ready_timeout_ms");
    }
  }

  void lora_placement(const YAML::Node& n, const std::string& field,
                      route::LoraPlacementConfig& l) const {
    only_keys(n, field,
              {"enabled", "interval_ms", "idle_unload_ms", "replica_demand", "backoff_ms",
               "max_wait_ms", "default_slots"});
    l.enabled = true;  // a lora_placement section turns it on unless it says otherwise
    if (auto v = n["enabled"]) l.enabled = boolean(v, field + ".enabled");
    if (auto v = n["interval_ms"]) {
      l.interval = integer(v, field + ".interval_ms", 10, 3'600'000) * kMillisecond;
    }
    if (auto v = n["idle_unload_ms"]) {
      l.idle_unload = integer(v, field + ".idle_unload_ms", 1, 7LL * 24 * 3'600'000) * kMillisecond;
    }
    if (auto v = n["replica_demand"]) {
      l.replica_demand = number(v, field + ".replica_demand");
      if (!(l.replica_demand > 0)) {
        fail(v, field + ".replica_demand", "expected requests per second per replica, > 0");
      }
    }
    if (auto v = n["backoff_ms"]) {
      l.load_backoff = integer(v, field + ".backoff_ms", 0, 3'600'000) * kMillisecond;
    }
    if (auto v = n["max_wait_ms"]) {
      l.max_wait = integer(v, field + ".max_wait_ms", 0, 600'000) * kMillisecond;
    }
    if (auto v = n["default_slots"]) {
      l.default_slots = static_cast<uint32_t>(integer(v, field + ".default_slots", 1, 1024));
    }
  }

  KvEventsConfig kv_events(const YAML::Node& n, const std::string& field,
                           const std::string& bind) const {
    only_keys(n, field, {"publisher", "replay", "topic"});
    KvEventsConfig k;
    if (auto v = n["publisher"]) k.publisher = text(v, field + ".publisher");
    if (auto v = n["replay"]) k.replay = text(v, field + ".replay");
    if (auto v = n["topic"]) k.topic = text(v, field + ".topic");
    if (bind.empty() && k.publisher.empty()) {
      fail(n, field + ".publisher", "missing (or set the pool's kv_events_bind)");
    }
    if (!bind.empty() && !k.publisher.empty()) {
      fail(n["publisher"], field + ".publisher",
           "not used with the pool's kv_events_bind (engines connect to the gateway)");
    }
    if (!k.publisher.empty() && !discovery::valid_zmq_url(k.publisher)) {
      fail(n["publisher"], field + ".publisher", "expected tcp://host:port");
    }
    if (!k.replay.empty() && !discovery::valid_zmq_url(k.replay)) {
      fail(n["replay"], field + ".replay", "expected tcp://host:port");
    }
    if (!bind.empty() && k.topic.empty()) {
      fail(n, field + ".topic", "required with the pool's kv_events_bind");
    }
    return k;
  }

  // The router section, read by the core's one reader (docs/router.md).
  void router(const YAML::Node& r, const std::string& field, route::RouterConfig& rc) const {
    if (Status st = route::read_router_section(r, field, rc, {}, file()); !st) {
      throw YamlError{st.error()};
    }
    // Build the router once so that an unknown policy or parameter fails here, at the
    // line of the router section, and not at start.
    kv::PreciseIndex precise({.block_size = rc.block_size});
    kv::ApproxIndex approx({});
    auto built = route::Router::create(rc, {.precise = &precise, .approx = &approx});
    if (!built) fail(r, field, built.error());
  }
};

}  // namespace

std::string_view to_string(TokenizeMode mode) {
  switch (mode) {
    case TokenizeMode::kAuto:
      return "auto";
    case TokenizeMode::kLocal:
      return "local";
    case TokenizeMode::kEngine:
      return "engine";
  }
  return "auto";
}

const ModelConfig* GatewayConfig::find_model(std::string_view name) const {
  for (const ModelConfig& m : models) {
    if (m.name == name) return &m;
    for (const std::string& a : m.aliases) {
      if (a == name) return &m;
    }
  }
  return nullptr;
}

const PoolConfig* GatewayConfig::find_pool(std::string_view name) const {
  for (const PoolConfig& p : pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Result<GatewayConfig> parse_gateway_config(std::string_view yaml, std::string_view file) {
  Parser parser(file);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) return Error(fmt::format("{}: expected a YAML mapping", file));
    return parser.parse(root);
  } catch (const YamlError& e) {
    return Error(e.message);
  } catch (const YAML::Exception& e) {
    return parser.error(e);
  }
}

Result<GatewayConfig> load_gateway_config(const std::string& file) {
  auto text = env::read_file(file);
  if (!text) return Error(text.error());
  return parse_gateway_config(*text, file);
}

}  // namespace kvgate::gateway
