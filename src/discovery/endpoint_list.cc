#include "discovery/endpoint_list.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/common/yaml_reader.h"
#include "core/route/data_parallel.h"

namespace kvgate::discovery {
namespace {

KvEventsAddress kv_events(const YamlReader& y, const YAML::Node& n, const std::string& field,
                          bool bind) {
  y.only_keys(n, field, {"publisher", "replay", "topic"});
  KvEventsAddress k;
  if (auto v = n["publisher"]) k.publisher = y.text(v, field + ".publisher");
  if (auto v = n["replay"]) k.replay = y.text(v, field + ".replay");
  if (auto v = n["topic"]) k.topic = y.text(v, field + ".topic");
  if (!bind && k.publisher.empty()) {
    y.fail(n, field + ".publisher", "missing (or set the pool's kv_events_bind)");
  }
  if (bind && !k.publisher.empty()) {
    y.fail(n["publisher"], field + ".publisher",
           "not used with the pool's kv_events_bind (engines connect to the gateway)");
  }
  if (!k.publisher.empty() && !valid_zmq_url(k.publisher)) {
    y.fail(n["publisher"], field + ".publisher", "expected tcp://host:port");
  }
  if (!k.replay.empty() && !valid_zmq_url(k.replay)) {
    y.fail(n["replay"], field + ".replay", "expected tcp://host:port");
  }
  if (bind && k.topic.empty())
    y.fail(n, field + ".topic", "required with the pool's kv_events_bind");
  return k;
}

std::vector<DiscoveredEndpoint> parse(const YamlReader& y, const YAML::Node& root, bool bind) {
  YAML::Node eps = root;
  std::string field = "endpoints";
  if (root.IsMap()) {
    y.only_keys(root, "file", {"endpoints"});
    eps = root["endpoints"];
    if (!eps) y.fail(root, field, "missing");
  }
  if (eps.IsNull()) return {};
  if (!eps.IsSequence()) y.fail(eps, field, "expected a list of endpoints");
  std::vector<DiscoveredEndpoint> out;
  std::set<std::string> urls;
  std::set<std::string> topics;
  for (size_t i = 0; i < eps.size(); ++i) {
    const std::string ef = fmt::format("{}[{}]", field, i);
    const YAML::Node& e = eps[i];
    DiscoveredEndpoint d;
    route::EndpointSpec& spec = d.spec;
    uint32_t dp_size = 1;  // data-parallel ranks behind the address
    if (e.IsScalar()) {
      spec.url = e.Scalar();
    } else {
      y.only_keys(e, ef,
                  {"url", "role", "zone", "rack", "labels", "kv_capacity_blocks", "kv_events",
                   "data_parallel_size"});
      if (auto v = e["data_parallel_size"]) dp_size = read_data_parallel_size(y, v, ef, bind);
      if (!e["url"]) y.fail(e, ef + ".url", "missing");
      spec.url = y.text(e["url"], ef + ".url");
      if (auto v = e["kv_events"]) {
        d.kv_events = kv_events(y, v, ef + ".kv_events", bind);
        if (bind && !topics.insert(d.kv_events->topic).second) {
          y.fail(v, ef + ".kv_events.topic",
                 fmt::format("topic '{}' used twice (bind mode tells engines apart by topic)",
                             d.kv_events->topic));
        }
      }
      if (auto v = e["role"]) {
        auto role = route::parse_role(y.text(v, ef + ".role"));
        if (!role) y.fail(v, ef + ".role", "expected both, prefill or decode");
        spec.role = *role;
      }
      if (auto v = e["zone"]) spec.zone = y.text(v, ef + ".zone");
      if (auto v = e["rack"]) spec.rack = y.text(v, ef + ".rack");
      if (auto v = e["kv_capacity_blocks"]) {
        spec.kv_capacity_blocks =
            static_cast<uint32_t>(y.integer(v, ef + ".kv_capacity_blocks", 0, 1LL << 31));
      }
      if (auto v = e["labels"]) {
        if (!v.IsMap()) y.fail(v, ef + ".labels", "expected a mapping");
        for (const auto& kv : v) {
          spec.labels.emplace_back(kv.first.Scalar(), y.text(kv.second, ef + ".labels"));
        }
      }
    }
    const YAML::Node& at = e.IsScalar() ? e : e["url"];
    // "http://host:port", or one rank of a data-parallel engine: "http://host:port#dpN"
    // (route/data_parallel.h), its KV events given as they are.
    const route::DpUrl dp = route::split_dp_url(spec.url);
    if (dp.rank && dp_size > 1) {
      y.fail(at, ef, "a rank's URL (#dpN) takes no data_parallel_size");
    }
    if (!valid_endpoint_url(dp.address)) {
      y.fail(at, e.IsScalar() ? ef : ef + ".url",
             fmt::format("expected http://host:port, got '{}'", spec.url));
    }
    if (!urls.insert(spec.url).second) {
      y.fail(at, ef, fmt::format("endpoint '{}' listed twice", spec.url));
    }
    // A data-parallel engine: one endpoint per rank, each with its rank's KV event ports.
    append_ranks(std::move(d), dp_size, out);
  }
  return out;
}

}  // namespace

bool valid_endpoint_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return false;
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  size_t colon = hostport.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == hostport.size()) return false;
  for (char ch : hostport.substr(colon + 1)) {
    if (ch < '0' || ch > '9') return false;
  }
  return slash == std::string_view::npos || rest.substr(slash) == "/";
}

bool valid_zmq_url(std::string_view url) {
  if (url.substr(0, 6) != "tcp://") return false;
  std::string_view rest = url.substr(6);
  size_t colon = rest.rfind(':');
  return colon != std::string_view::npos && colon > 0 && colon + 1 < rest.size();
}

uint32_t read_data_parallel_size(const YamlReader& y, const YAML::Node& v, const std::string& field,
                                 bool kv_events_bind) {
  const auto size = static_cast<uint32_t>(
      y.integer(v, field + ".data_parallel_size", 1, route::kMaxDataParallelSize));
  if (size > 1 && kv_events_bind) {
    y.fail(v, field + ".data_parallel_size",
           "not with the pool's kv_events_bind (each rank publishes on its own port)");
  }
  return size;
}

void append_ranks(DiscoveredEndpoint e, uint32_t size, std::vector<DiscoveredEndpoint>& out) {
  if (size <= 1) {
    out.push_back(std::move(e));
    return;
  }
  std::vector<route::EndpointSpec> ranks = route::expand_data_parallel(e.spec, size);
  for (uint32_t rank = 0; rank < ranks.size(); ++rank) {
    DiscoveredEndpoint r = e;
    r.spec = std::move(ranks[rank]);
    if (e.kv_events) {
      r.kv_events->publisher = route::dp_rank_zmq_endpoint(e.kv_events->publisher, rank);
      r.kv_events->replay = route::dp_rank_zmq_endpoint(e.kv_events->replay, rank);
    }
    out.push_back(std::move(r));
  }
}

Result<std::vector<DiscoveredEndpoint>> parse_endpoint_list(std::string_view text,
                                                            std::string_view file,
                                                            bool kv_events_bind) {
  YamlReader y(file);
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root || root.IsNull()) return Error(fmt::format("{}: empty file", file));
    return parse(y, root, kv_events_bind);
  } catch (const YamlError& e) {
    return Error(e.message);
  } catch (const YAML::Exception& e) {
    return y.error(e);
  }
}

}  // namespace kvgate::discovery
