// Data-parallel ranks: one engine address serving several independent engine cores.
//
// vLLM's data-parallel serving (`vllm serve --data-parallel-size N`) puts N engine cores,
// each with its own KV cache and scheduler, behind one HTTP address. A request is pinned
// to a rank by the header X-data-parallel-rank (absent: vLLM balances on the ranks' queue
// lengths); rank r publishes its KV events on the configured port + r, each batch
// carrying data_parallel_rank = r; /metrics has one series per rank, labelled
// engine="r".
//
// kvgate routes to ranks as to engines: each (address, rank) is an endpoint of its own
// in the pool, so the router, the indexes and the cost see N engines. Its URL, the
// endpoint's identity everywhere (metrics labels, sync, index snapshots, discovery), is
// the address with a fragment naming the rank:
//
//   http://10.0.0.7:8000#dp2     rank 2 of the engine at http://10.0.0.7:8000
//
// A fragment is never sent (io::parse_url drops it), so every HTTP use of the URL goes
// to the address; the gateway adds the rank header to what it sends there.
//
//   std::vector<EndpointSpec> ranks = expand_data_parallel({.url = "http://a:8000"}, 4);
//   // ranks[1].url == "http://a:8000#dp1"; split_dp_url(ranks[1].url).rank == 1
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/route/endpoint.h"

namespace kvgate::route {

// The header vLLM's OpenAI server reads to pin a request to a rank (HTTP header names
// are case-insensitive; vLLM spells it so).
inline constexpr std::string_view kDataParallelRankHeader = "X-data-parallel-rank";
// The largest --data-parallel-size the configuration accepts.
inline constexpr uint32_t kMaxDataParallelSize = 256;

// "http://a:8000" and 2 -> "http://a:8000#dp2".
std::string dp_rank_url(std::string_view address, uint32_t rank);

// An endpoint URL's address and rank: "http://a:8000#dp2" -> {"http://a:8000", 2}; a URL
// without a "#dpN" fragment -> {url, nullopt}. Views into `url`.
struct DpUrl {
  std::string_view address;
  std::optional<uint32_t> rank;
};
DpUrl split_dp_url(std::string_view url);

// The rank endpoints of an engine at spec.url serving `size` ranks: `size` copies of
// `spec` whose URLs name ranks 0..size-1. size <= 1: {spec} unchanged (no rank: the
// engine is not data-parallel, and no header is sent).
std::vector<EndpointSpec> expand_data_parallel(const EndpointSpec& spec, uint32_t size);

// Where rank `rank` publishes KV events when the engine is configured with `endpoint`,
// as vLLM's ZmqEventPublisher derives it: a tcp:// port plus the rank, an inproc://
// name with "_dp<rank>" appended; rank 0, an empty endpoint and a port 0 (ephemeral)
// are left as they are.
std::string dp_rank_zmq_endpoint(std::string_view endpoint, uint32_t rank);

}  // namespace kvgate::route
