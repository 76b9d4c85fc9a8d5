// What gateway replicas read from each other through Redis (docs/replicas.md): routing
// event batches (cluster/routing_event.h), index snapshots (cluster/index_snapshot.h) and
// hot-prefix lists (cluster/hot_prefix_share.h) and service reports (fleet fairness,
// cluster/fleet_fairness.h). Whatever decodes, encoded again, decodes again and encodes
// to the same bytes; a restored snapshot leaves an index that matches.
//
// Input: [1 byte: which form, modulo 4][the form's bytes].
#include <string>

#include "core/cluster/fleet_fairness.h"
#include "core/cluster/hot_prefix_share.h"
#include "core/cluster/index_snapshot.h"
#include "core/cluster/routing_event.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate;

void routing_events(std::string_view in) {
  const Result<cluster::EventBatch> b = cluster::decode(in);
  if (!b) return;
  const std::string once = cluster::encode(*b);
  const Result<cluster::EventBatch> back = cluster::decode(once);
  KVGATE_FUZZ_CHECK(static_cast<bool>(back), "an encoded batch does not decode: " + back.error());
  KVGATE_FUZZ_CHECK(*back == *b, "an encoded batch decodes to another batch");
}

void index_snapshot(std::string_view in) {
  const Result<cluster::IndexSnapshot> s = cluster::decode_snapshot(in);
  if (!s) return;
  const std::string once = cluster::encode(*s);
  const Result<cluster::IndexSnapshot> back = cluster::decode_snapshot(once);
  KVGATE_FUZZ_CHECK(static_cast<bool>(back),
                    "an encoded snapshot does not decode: " + back.error());
  KVGATE_FUZZ_CHECK(cluster::encode(*back) == once, "a snapshot's encoding is not stable");
  // Restored into a pool that has some of its endpoints: the index takes anything.
  route::EndpointPool pool(16);
  for (size_t i = 0; i < back->endpoints.size() && i < 8; i += 2) {
    (void)pool.add({.url = back->endpoints[i]}, 0);
  }
  kv::ApproxIndex index({.ttl = 120 * kSecond, .capacity_pairs = 4096});
  const cluster::RestoreStats r = cluster::restore_snapshot(*back, index, pool, 0, 0);
  KVGATE_FUZZ_CHECK(r.restored + r.unknown_endpoint + r.expired == back->pairs.size(),
                    "restore lost count of pairs");
  std::vector<kv::EndpointMatch> out;
  std::vector<kv::BlockKey> keys;
  for (size_t i = 0; i < back->pairs.size() && i < 64; ++i) keys.push_back(back->pairs[i].key);
  index.match(keys, 0, out);
}

void hot_prefixes(std::string_view in) {
  const Result<cluster::SharedHotPrefixes> h = cluster::decode_hot_prefixes(in);
  if (!h) return;
  const std::string once = cluster::encode_hot_prefixes(h->replica, h->written_ms, h->prefixes);
  const Result<cluster::SharedHotPrefixes> back = cluster::decode_hot_prefixes(once);
  KVGATE_FUZZ_CHECK(static_cast<bool>(back), "an encoded list does not decode: " + back.error());
  KVGATE_FUZZ_CHECK(
      cluster::encode_hot_prefixes(back->replica, back->written_ms, back->prefixes) == once,
      "a hot-prefix list's encoding is not stable");
  const std::vector<std::vector<kv::HotPrefix>> lists = {h->prefixes, back->prefixes};
  const std::vector<kv::HotPrefix> merged = kv::merge_hot_prefixes(lists, 8);
  KVGATE_FUZZ_CHECK(merged.size() <= 8, "merge returned more than asked");
}

void service_report(std::string_view in) {
  const Result<cluster::ServiceReport> r = cluster::decode_service_report(in);
  if (!r) return;
  const std::string once = cluster::encode(*r);
  const Result<cluster::ServiceReport> back = cluster::decode_service_report(once);
  KVGATE_FUZZ_CHECK(static_cast<bool>(back), "an encoded report does not decode: " + back.error());
  KVGATE_FUZZ_CHECK(cluster::encode(*back) == once, "a service report's encoding is not stable");
  // Applied to a queue: the counters take any finite service.
  route::FlowQueueConfig config;
  config.enabled = true;
  route::FlowQueue queue(config);
  cluster::FleetFairness fair(queue, "fuzz", back->pool, {});
  fair.apply(*back, 0);
  KVGATE_FUZZ_CHECK(!fair.take().has_value(), "a peer's service was reported as own");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      routing_events(in);
      break;
    case 1:
      index_snapshot(in);
      break;
    case 2:
      hot_prefixes(in);
      break;
    default:
      service_report(in);
      break;
  }
  return 0;
}
