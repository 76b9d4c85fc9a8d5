// The routing pipeline's extension points: Filter, Policy and Scorer.
//
// A decision runs: healthy endpoints of the right role -> filters (each may drop
// candidates, and reject the request when it drops them all) -> the policy, which
// gives each remaining candidate a cost and picks one. Scorers are the pieces of the
// weighted "scorers" policy (Gateway API Inference Extension style): each rates every
// candidate in [0, 1], higher is better, and the policy picks the best weighted sum.
//
// All three are small objects built once from config by name (registry.h) and called
// on the router's strand, so they may keep state (round-robin's counter) without locks.
// They never see I/O: time is ctx.now, randomness the Rng& passed in.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/common/rng.h"
#include "core/route/config.h"
#include "core/route/decision.h"
#include "core/route/endpoint.h"
#include "core/route/endpoint_pool.h"
#include "core/route/load.h"
#include "core/route/request.h"

namespace kvgate::route {

// Which part of a request is being placed.
enum class Stage : uint8_t {
  kWhole,    // aggregated: one endpoint prefills and decodes
  kPrefill,  // disaggregated, the prefill endpoint
  kDecode,   // disaggregated, the decode endpoint
};

// One endpoint the request may go to, with what the router knows about it for this
// request. A new endpoint simply has zero overlap and zero load.
struct Candidate {
  const Endpoint* endpoint = nullptr;
  EffectiveLoad load;          // load.h, computed once per decision
  uint32_t gpu_blocks = 0;     // leading prompt blocks cached in GPU memory there
  uint32_t cached_blocks = 0;  // leading prompt blocks cached in any tier (>= gpu_blocks)
  uint32_t disk_blocks = 0;    // of cached_blocks - gpu_blocks, those on disk only
  uint32_t active_prefix = 0;  // leading prompt blocks its in-flight requests hold
  double cost = 0;             // the policy's cost (lower wins); scorers' -score
};

struct RouteContext {
  const RouteRequest& request;
  const RouterConfig& config;
  const EndpointPool& pool;
  Nanos now = 0;
  Stage stage = Stage::kWhole;
  uint32_t block_size = 16;
  // Blocks this request occupies where it decodes (prompt + expected output).
  uint32_t request_blocks = 0;
  // kDecode only: the chosen prefill endpoint (for rack/zone locality).
  const Endpoint* prefill_endpoint = nullptr;

  uint32_t prompt_blocks() const { return static_cast<uint32_t>(request.keys.size()); }
  // Prompt tokens `c` would have to compute (not cached there in GPU memory).
  uint32_t uncached_tokens(const Candidate& c) const;
};

class Filter {
 public:
  virtual ~Filter() = default;
  virtual std::string_view name() const = 0;
  // Removes the candidates that must not get this request. Returns kNone, or the reason
  // to reject the request when it removed every candidate. REQUIRES: !c.empty().
  virtual RejectReason apply(const RouteContext& ctx, std::vector<Candidate>& c) = 0;
};

// One named part of a candidate's cost (Router::explain): a policy that breaks its cost
// down gives parts that add up to it.
struct CostTerm {
  std::string_view name;  // static text, e.g. "prefill"
  double value = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  // True when the policy reads gpu_blocks / cached_blocks / active_prefix; the router
  // skips the index match and the active-block walk otherwise.
  virtual bool uses_overlap() const { return false; }
  // Returns the index of the chosen candidate and sets at least its cost.
  // REQUIRES: !c.empty().
  virtual size_t pick(const RouteContext& ctx, std::span<Candidate> c, Rng& rng) = 0;
  // The parts of the cost pick() gave `c`, for explanations only (Router::explain; never
  // on the routing path). Appends nothing when the policy does not break its cost down.
  virtual void cost_terms(const RouteContext& /*ctx*/, const Candidate& /*c*/,
                          std::vector<CostTerm>& /*out*/) const {}
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual std::string_view name() const = 0;
  virtual bool uses_overlap() const { return false; }
  // Writes one score in [0, 1] per candidate (higher is better). out.size() == c.size().
  virtual void score(const RouteContext& ctx, std::span<const Candidate> c,
                     std::span<double> out) = 0;
};

// Index of the lowest cost; ties broken uniformly at random (a fixed order would send
// every tie to the same endpoint, the imbalance Dynamo saw with HashMap order).
size_t pick_lowest_cost(std::span<const Candidate> c, Rng& rng);

// Softmax sampling over range-normalized costs, as Dynamo's router does:
// p_i ~ exp(-(cost_i - min) / ((max - min) x temperature)). temperature <= 0 is
// pick_lowest_cost.
size_t pick_softmax(std::span<const Candidate> c, double temperature, Rng& rng);

}  // namespace kvgate::route
