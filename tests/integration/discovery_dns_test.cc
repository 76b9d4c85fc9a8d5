// The DNS source against a real DNS server: dnsmasq on a loopback port, started here.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

#include "discovery/dns_source.h"
#include "support/dnsmasq.h"
#include "support/recording_sink.h"

namespace kvgate::testing {
namespace {

using discovery::DnsSourceConfig;
using std::chrono::milliseconds;

std::set<std::string> urls(const discovery::DnsAnswer& a) {
  std::set<std::string> out;
  for (const auto& e : a.endpoints) out.insert(e.spec.url);
  return out;
}

// Resolves until the answer's URLs are `want` (dnsmasq starts, re-reads its files).
Result<discovery::DnsAnswer> resolve_until(const DnsSourceConfig& c,
                                           const std::set<std::string>& want) {
  Result<discovery::DnsAnswer> last = Error("never resolved");
  for (int i = 0; i < 100; ++i) {
    last = discovery::resolve_endpoints(c);
    if (last && urls(*last) == want) return last;
    // Waits for dnsmasq to start or to re-read its files.
    std::this_thread::sleep_for(milliseconds(50));
  }
  return last;
}

DnsSourceConfig config(const Dnsmasq& dns, const std::string& name) {
  DnsSourceConfig c;
  c.name = name;
  c.port = 8000;
  c.server = dns.server();
  c.timeout = milliseconds(1000);
  return c;
}

TEST(DiscoveryDns, ARecordsAddedAndRemoved) {
  Dnsmasq dns(/*ttl=*/7, {});
  dns.set_hosts("127.0.0.11 engines.test\n127.0.0.12 engines.test\n");
  DnsSourceConfig c = config(dns, "engines.test");
  c.endpoint.role = Role::kDecode;
  c.endpoint.kv_events_port = 5557;
  auto a = resolve_until(c, {"http://127.0.0.11:8000", "http://127.0.0.12:8000"});
  ASSERT_TRUE(a) << a.error();
  ASSERT_EQ(urls(*a).size(), 2u);
  EXPECT_EQ(a->min_ttl, 7u);
  EXPECT_EQ(a->endpoints[0].spec.role, Role::kDecode);
  ASSERT_TRUE(a->endpoints[0].kv_events);
  EXPECT_TRUE(a->endpoints[0].kv_events->publisher.starts_with("tcp://127.0.0.1"));

  dns.set_hosts("127.0.0.11 engines.test\n127.0.0.13 engines.test\n");
  auto b = resolve_until(c, {"http://127.0.0.11:8000", "http://127.0.0.13:8000"});
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(urls(*b), (std::set<std::string>{"http://127.0.0.11:8000", "http://127.0.0.13:8000"}));

  // A name with no records is an empty set, not an error.
  auto none = discovery::resolve_endpoints(config(dns, "nothing.test"));
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->endpoints.empty());
}

TEST(DiscoveryDns, SrvRecordsGiveTheirPortsAndAaaaRecordsWork) {
  Dnsmasq dns(/*ttl=*/5, {"--srv-host=_http._tcp.engines.test,e1.test,8001,0,10",
                          "--srv-host=_http._tcp.engines.test,e2.test,8002,0,10",
                          "--host-record=e1.test,127.0.0.21", "--host-record=e2.test,127.0.0.22",
                          "--host-record=v6.test,::1"});
  DnsSourceConfig srv = config(dns, "_http._tcp.engines.test");
  srv.record = DnsSourceConfig::Record::kSrv;
  auto a = resolve_until(srv, {"http://127.0.0.21:8001", "http://127.0.0.22:8002"});
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(urls(*a), (std::set<std::string>{"http://127.0.0.21:8001", "http://127.0.0.22:8002"}));

  DnsSourceConfig v6 = config(dns, "v6.test");
  v6.record = DnsSourceConfig::Record::kAAAA;
  auto b = resolve_until(v6, {"http://[::1]:8000"});
  ASSERT_TRUE(b) << b.error();

  // SRV records change with a restart (dnsmasq reads --srv-host once): one target gone,
  // one on a new port.
  dns.restart(
      {"--srv-host=_http._tcp.engines.test,e2.test,9002,0,10", "--host-record=e2.test,127.0.0.22"});
  auto c = resolve_until(srv, {"http://127.0.0.22:9002"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(urls(*c), (std::set<std::string>{"http://127.0.0.22:9002"}));
}

TEST(DiscoveryDns, DataParallelAddressesAreOneEndpointPerRank) {
  // `data_parallel_size: 2`: every address is two rank endpoints (URL#dp0, #dp1), rank r's
  // KV events on the template's port + r; a changed address set changes the ranks with it.
  Dnsmasq dns(/*ttl=*/7, {});
  dns.set_hosts("127.0.0.11 engines.test\n127.0.0.12 engines.test\n");
  DnsSourceConfig c = config(dns, "engines.test");
  c.data_parallel_size = 2;
  c.endpoint.role = Role::kDecode;
  c.endpoint.kv_events_port = 5557;
  c.endpoint.kv_replay_port = 5600;
  auto a = resolve_until(c, {"http://127.0.0.11:8000#dp0", "http://127.0.0.11:8000#dp1",
                             "http://127.0.0.12:8000#dp0", "http://127.0.0.12:8000#dp1"});
  ASSERT_TRUE(a) << a.error();
  ASSERT_EQ(a->endpoints.size(), 4u);
  for (const discovery::DiscoveredEndpoint& e : a->endpoints) {
    const std::string address = e.spec.url.substr(7, e.spec.url.find(':', 7) - 7);
    const bool rank1 = e.spec.url.ends_with("#dp1");
    EXPECT_EQ(e.spec.role, Role::kDecode) << e.spec.url;
    ASSERT_TRUE(e.kv_events) << e.spec.url;
    EXPECT_EQ(e.kv_events->publisher, "tcp://" + address + (rank1 ? ":5558" : ":5557"));
    EXPECT_EQ(e.kv_events->replay, "tcp://" + address + (rank1 ? ":5601" : ":5600"));
  }
  dns.set_hosts("127.0.0.12 engines.test\n");
  auto b = resolve_until(c, {"http://127.0.0.12:8000#dp0", "http://127.0.0.12:8000#dp1"});
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(urls(*b),
            (std::set<std::string>{"http://127.0.0.12:8000#dp0", "http://127.0.0.12:8000#dp1"}));
}

TEST(DiscoveryDns, TheSourceReResolvesWhenTheTtlRunsOutAndKeepsItsSetWhenTheServerIsDown) {
  Dnsmasq dns(/*ttl=*/1, {});
  dns.set_hosts("127.0.0.11 engines.test\n");
  DnsSourceConfig c = config(dns, "engines.test");
  c.interval = milliseconds(60'000);  // far longer than the test: only the TTL brings changes
  c.min_interval = milliseconds(200);
  RecordingSink sink;
  discovery::DnsSource source(c, sink);
  ASSERT_TRUE(source.start().ok());
  ASSERT_TRUE(sink.wait_for_urls({"http://127.0.0.11:8000"})) << sink.errors().size();

  const auto changed = std::chrono::steady_clock::now();
  dns.set_hosts("127.0.0.11 engines.test\n127.0.0.12 engines.test\n");
  ASSERT_TRUE(sink.wait_for_urls({"http://127.0.0.11:8000", "http://127.0.0.12:8000"},
                                 std::chrono::seconds(5)));
  // Within a TTL (1 s) and a re-read, not the 60 s interval.
  EXPECT_LT(std::chrono::steady_clock::now() - changed, std::chrono::seconds(4));

  // Server down: errors, counted, and no report that would empty the pool.
  const size_t reports_before = sink.reports().size();
  dns.stop();
  ASSERT_TRUE(sink.wait([](const auto&, const auto& errors) { return !errors.empty(); },
                        std::chrono::seconds(10)));
  EXPECT_NE(sink.errors().back().find("engines.test A"), std::string::npos) << sink.errors().back();
  auto reports = sink.reports();
  for (size_t i = reports_before; i < reports.size(); ++i) {
    EXPECT_FALSE(reports[i].set.empty());  // at most answers that came before the stop
  }
  source.stop();
}

}  // namespace
}  // namespace kvgate::testing
