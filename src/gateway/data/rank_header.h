// The data-parallel rank header of a request sent to an engine.
//
// An endpoint that is one rank of a data-parallel engine (route/data_parallel.h) is
// reached at its address with X-data-parallel-rank naming the rank, which vLLM's server
// reads to hand the request to that engine core. Every hop the gateway sends to a chosen
// endpoint (the request, a prefill hop, a migrated continuation, a relayed or stored
// Responses call) sets it; an endpoint without a rank gets none. The gateway forwards no
// client header of that name: the router's choice is the only one the engine sees.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/route/data_parallel.h"
#include "gateway/data/pool_routing.h"
#include "io/upstream_client.h"

namespace kvgate::gateway {

// Sets (or, for an endpoint without a rank, removes) the rank header in `headers`: a
// request retried on another endpoint carries the new one's rank, never the old.
inline void set_rank_header(io::UpstreamHeaders& headers, const EndpointAddress& endpoint) {
  std::erase_if(headers, [](const std::pair<std::string, std::string>& h) {
    return h.first == route::kDataParallelRankHeader;
  });
  if (endpoint.dp_rank) {
    headers.emplace_back(std::string(route::kDataParallelRankHeader),
                         std::to_string(*endpoint.dp_rank));
  }
}

}  // namespace kvgate::gateway
