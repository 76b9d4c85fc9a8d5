#include "discovery/dns_source.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "discovery/endpoint_list.h"

namespace kvgate::discovery {
namespace {

using Record = DnsSourceConfig::Record;

// A resolver state of our own (res_nquery is thread-safe with one state per thread).
class Resolver {
 public:
  static Result<Resolver> open(const DnsSourceConfig& c) {
    Resolver r;
    std::memset(&r.state_, 0, sizeof r.state_);
    if (res_ninit(&r.state_) != 0) return Error("res_ninit failed");
    r.open_ = true;
    r.state_.retrans = std::max<int>(1, static_cast<int>(c.timeout.count() / 1000));
    r.state_.retry = 2;
    r.state_.options |= RES_USE_EDNS0;  // large answers in one datagram (TCP if truncated)
    r.state_.options &= ~(RES_DNSRCH | RES_DEFNAMES);
    if (!c.server.empty()) {
      const size_t colon = c.server.rfind(':');
      const std::string host = c.server.substr(0, colon);
      const int port = std::atoi(c.server.c_str() + colon + 1);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(static_cast<uint16_t>(port));
      if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
        return Error("dns server: not an IPv4 address: " + host);
      }
      r.state_.nsaddr_list[0] = sa;
      r.state_.nscount = 1;
      // IPv6 servers from resolv.conf live beside the list: not ours.
      for (int i = 0; i < MAXNS; ++i) {
        if (r.state_._u._ext.nsaddrs[i] != nullptr) {
          std::free(r.state_._u._ext.nsaddrs[i]);
          r.state_._u._ext.nsaddrs[i] = nullptr;
        }
      }
    }
    return r;
  }
  Resolver(Resolver&& o) noexcept : state_(o.state_), open_(o.open_) { o.open_ = false; }
  Resolver& operator=(Resolver&&) = delete;
  ~Resolver() {
    if (open_) res_nclose(&state_);
  }

  // The answer, parsed; an empty message for NXDOMAIN / no data of the type.
  struct Reply {
    std::vector<unsigned char> bytes;
    ns_msg msg{};
    bool empty = false;
  };
  Result<Reply> query(const std::string& name, ns_type type) {
    Reply r;
    r.bytes.resize(65536);
    const int n = res_nquery(&state_, name.c_str(), ns_c_in, type, r.bytes.data(),
                             static_cast<int>(r.bytes.size()));
    if (n < 0) {
      switch (state_.res_h_errno) {
        case HOST_NOT_FOUND:
        case NO_DATA:
          r.empty = true;
          return r;
        case TRY_AGAIN:
          return Error(
              fmt::format("{} {}: no answer (timed out or SERVFAIL)", name, type_name(type)));
        default:
          return Error(
              fmt::format("{} {}: query failed (refused or bad answer)", name, type_name(type)));
      }
    }
    r.bytes.resize(static_cast<size_t>(n));
    if (ns_initparse(r.bytes.data(), n, &r.msg) != 0) {
      return Error(fmt::format("{} {}: malformed answer", name, type_name(type)));
    }
    return r;
  }

  static const char* type_name(ns_type t) {
    return t == ns_t_a ? "A" : t == ns_t_aaaa ? "AAAA" : t == ns_t_srv ? "SRV" : "?";
  }

 private:
  Resolver() = default;
  struct __res_state state_;
  bool open_ = false;
};

struct Address {
  std::string text;  // as in a URL host: 10.0.0.7 or [fd00::7]
  std::string bare;  // 10.0.0.7 or fd00::7
};

// The A or AAAA records of `section` whose owner is `owner` (any owner when empty).
void addresses(ns_msg& msg, ns_sect section, ns_type type, const std::string& owner,
               std::vector<Address>& out, uint32_t& min_ttl) {
  const int count = ns_msg_count(msg, section);
  for (int i = 0; i < count; ++i) {
    ns_rr rr;
    if (ns_parserr(&msg, section, i, &rr) != 0) continue;
    if (ns_rr_type(rr) != type || ns_rr_class(rr) != ns_c_in) continue;
    if (!owner.empty() && strcasecmp(ns_rr_name(rr), owner.c_str()) != 0) continue;
    char buf[INET6_ADDRSTRLEN];
    const int af = type == ns_t_a ? AF_INET : AF_INET6;
    const size_t want = type == ns_t_a ? 4 : 16;
    if (ns_rr_rdlen(rr) != want || !inet_ntop(af, ns_rr_rdata(rr), buf, sizeof buf)) continue;
    std::string bare = buf;
    out.push_back({af == AF_INET ? bare : "[" + bare + "]", bare});
    min_ttl = std::min<uint32_t>(min_ttl, ns_rr_ttl(rr));
  }
}

DiscoveredEndpoint make_endpoint(const EndpointTemplate& t, const Address& a, uint16_t port) {
  DiscoveredEndpoint e;
  e.spec.url = fmt::format("http://{}:{}", a.text, port);
  e.spec.role = t.role;
  e.spec.zone = t.zone;
  e.spec.rack = t.rack;
  e.spec.labels = t.labels;
  if (t.kv_events_port != 0) {
    KvEventsAddress k;
    k.publisher = fmt::format("tcp://{}:{}", a.text, t.kv_events_port);
    if (t.kv_replay_port != 0) k.replay = fmt::format("tcp://{}:{}", a.text, t.kv_replay_port);
    e.kv_events = std::move(k);
  }
  return e;
}

}  // namespace

Result<DnsAnswer> resolve_endpoints(const DnsSourceConfig& c) {
  auto resolver = Resolver::open(c);
  if (!resolver) return Error(resolver.error());
  DnsAnswer answer;
  uint32_t min_ttl = std::numeric_limits<uint32_t>::max();
  std::set<std::string> seen;
  auto add = [&](const Address& a, uint16_t port) {
    DiscoveredEndpoint e = make_endpoint(c.endpoint, a, port);
    // An address serving data-parallel ranks is one endpoint per rank (URL#dpR).
    if (seen.insert(e.spec.url).second) {
      append_ranks(std::move(e), c.data_parallel_size, answer.endpoints);
    }
  };
  if (c.record != Record::kSrv) {
    const ns_type type = c.record == Record::kA ? ns_t_a : ns_t_aaaa;
    auto reply = resolver->query(c.name, type);
    if (!reply) return Error(reply.error());
    if (!reply->empty) {
      std::vector<Address> found;
      addresses(reply->msg, ns_s_an, type, "", found, min_ttl);
      for (const Address& a : found) add(a, c.port);
    }
  } else {
    auto reply = resolver->query(c.name, ns_t_srv);
    if (!reply) return Error(reply.error());
    if (!reply->empty) {
      ns_msg& msg = reply->msg;
      const int count = ns_msg_count(msg, ns_s_an);
      for (int i = 0; i < count; ++i) {
        ns_rr rr;
        if (ns_parserr(&msg, ns_s_an, i, &rr) != 0 || ns_rr_type(rr) != ns_t_srv) continue;
        if (ns_rr_rdlen(rr) < 7) continue;
        const unsigned char* rd = ns_rr_rdata(rr);
        // priority, weight, port, target (RFC 2782); priority and weight are not used:
        // the router balances by load.
        const uint16_t port = static_cast<uint16_t>(ns_get16(rd + 4));
        char target[NS_MAXDNAME];
        if (ns_name_uncompress(ns_msg_base(msg), ns_msg_end(msg), rd + 6, target, sizeof target) <
            0) {
          continue;
        }
        min_ttl = std::min<uint32_t>(min_ttl, ns_rr_ttl(rr));
        std::vector<Address> found;
        addresses(msg, ns_s_ar, ns_t_a, target, found, min_ttl);
        addresses(msg, ns_s_ar, ns_t_aaaa, target, found, min_ttl);
        if (found.empty()) {  // no glue: ask for the target's addresses
          for (ns_type t : {ns_t_a, ns_t_aaaa}) {
            auto r = resolver->query(target, t);
            if (!r) return Error(r.error());
            if (!r->empty) addresses(r->msg, ns_s_an, t, "", found, min_ttl);
          }
        }
        for (const Address& a : found) add(a, port);
      }
    }
  }
  answer.min_ttl = min_ttl == std::numeric_limits<uint32_t>::max() ? 0 : min_ttl;
  return answer;
}

DnsSource::DnsSource(DnsSourceConfig config, SourceSink& sink)
    : config_(std::move(config)), sink_(sink) {}

DnsSource::~DnsSource() { stop(); }

Status DnsSource::start() {
  thread_ = std::thread([this] { run(); });
  return {};
}

void DnsSource::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DnsSource::run() {
  using namespace std::chrono;
  std::string last_error;
  while (true) {
    auto answer = resolve_endpoints(config_);
    milliseconds wait = config_.interval;
    if (answer) {
      if (!last_error.empty()) spdlog::info("discovery: dns {} answers again", config_.name);
      last_error.clear();
      if (answer->min_ttl > 0) {
        wait = std::clamp<milliseconds>(std::chrono::seconds(answer->min_ttl), config_.min_interval,
                                        config_.interval);
      }
      sink_.report(std::move(answer->endpoints), /*resync=*/false);
    } else {
      if (answer.error() != last_error) {
        spdlog::warn("discovery: dns {} (the last good set is kept)", answer.error());
        last_error = answer.error();
      }
      sink_.error(answer.error());
      wait = config_.min_interval;
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, wait, [this] { return stopping_; })) return;
  }
}

}  // namespace kvgate::discovery
