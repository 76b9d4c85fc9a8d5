// DnsSource: endpoints from DNS, the way a headless Kubernetes Service publishes its
// ready pods: A or AAAA records of a name (every address gets the configured port), or
// SRV records (each target's addresses at the record's port).
//
// Queries go through the system's resolver library (libresolv's res_nquery, one retry
// after `timeout`), to `server` when given, else to the servers in /etc/resolv.conf; the
// name is used as given (no search domains: write the FQDN). It re-resolves every
// `interval`, sooner when the shortest TTL of the answer runs out (never more often than
// `min_interval`). A name that does not exist or has no records of the type is an empty
// set (which the reconciler holds when it comes suddenly); a timeout, SERVFAIL or a
// refused query is an error, and the last good set stays. With `data_parallel_size: N`
// every address is N endpoints, one per data-parallel rank (URL#dp0 .. #dpN-1, rank r's
// KV event ports + r; route/data_parallel.h).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "discovery/source.h"

namespace kvgate::discovery {

struct DnsAnswer {
  std::vector<DiscoveredEndpoint> endpoints;
  uint32_t min_ttl = 0;  // seconds, over every record used; 0 when there were none
};

// One resolution (blocking, at most about 2 x timeout per query).
Result<DnsAnswer> resolve_endpoints(const DnsSourceConfig& config);

class DnsSource : public EndpointSource {
 public:
  DnsSource(DnsSourceConfig config, SourceSink& sink);
  ~DnsSource() override;
  Status start() override;
  void stop() override;

 private:
  void run();

  const DnsSourceConfig config_;
  SourceSink& sink_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace kvgate::discovery
