// EndpointSource: one place endpoints are discovered from (a file, DNS, Kubernetes),
// behind one interface and chosen by the `kind` of its config (make_source).
//
// A source runs on a thread of its own and tells its sink the whole set it sees each
// time it has read one (a file re-read, a DNS answer, a Kubernetes LIST or a WATCH event
// applied to the set it keeps), or that it failed; it never touches the pool itself.
// What a set does to the pool (adds, drains, grace periods, held empty sets) is the
// reconciler's decision (core/discovery/reconciler.h), the same for every source.
//
//   auto source = make_source(config.sources[0], sink);
//   (*source)->start();   // reports begin
//   (*source)->stop();    // no report after this returns
//
// check_source() is start() without the start: `kvgate serve --check` refuses what
// `kvgate serve` would refuse, with the same message.
//
//   if (Status s = check_source(config.sources[0]); !s) print(s.error());
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/discovery/reconciler.h"
#include "discovery/discovery_config.h"

namespace kvgate::discovery {

// Where a source reports. Thread-safe; the calls are quick (they never block on the pool).
class SourceSink {
 public:
  virtual ~SourceSink() = default;
  // The whole set now; `resync`: from a periodic full read (differences are counted).
  virtual void report(std::vector<DiscoveredEndpoint> set, bool resync) = 0;
  // A read, answer or watch that failed: the last good set stays.
  virtual void error(std::string message) = 0;
};

class EndpointSource {
 public:
  virtual ~EndpointSource() = default;
  // Starts the source's thread. Errors: what cannot work at all (no inotify, unreadable
  // credentials); a source that merely cannot reach its server yet starts and reports
  // errors until it can.
  virtual Status start() = 0;
  // Idempotent; after it returns the sink is called no more. Also run by the destructor
  // of each implementation.
  virtual void stop() = 0;
};

// The source of `config.kind` (file, dns, kubernetes). `sink` must outlive it.
Result<std::unique_ptr<EndpointSource>> make_source(const SourceConfig& config, SourceSink& sink);

// What make_source() and then start() of that source would refuse, with the same
// message, tried without starting anything: a file source adds its inotify watch on the
// file's directory and removes it (a missing file is not an error: the source waits for
// it); a Kubernetes source loads the credentials it would connect with (its kubeconfig,
// or the service account's CA and token); a DNS source has nothing to try beyond its
// config (a name that does not resolve yet is not an error at start either). Nothing is
// sent over the network. Blocking (a few file reads); thread-safe.
[[nodiscard]] Status check_source(const SourceConfig& config);

}  // namespace kvgate::discovery
