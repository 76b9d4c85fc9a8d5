// The baselines every router has: random, round-robin, least-request, power-of-two.
// They ignore the prompt; load is the router's own count of requests in flight, which
// is exact and current (scrapes lag).
#include "core/route/builtins.h"
#include "core/route/registry.h"

namespace kvgate::route::builtin {
namespace {

Status no_params(const PolicyConfig& config) { return ParamReader(config).finish(); }

double in_flight(const Candidate& c) { return c.endpoint->load.in_flight; }

class RandomPolicy final : public Policy {
 public:
  std::string_view name() const override { return "random"; }
  size_t pick(const RouteContext&, std::span<Candidate> c, Rng& rng) override {
    size_t i = rng.below(c.size());
    c[i].cost = 0;
    return i;
  }
};

// Cycles through the candidates in id order. With a changing candidate set the cycle
// is approximate (the counter is global, not per endpoint), as in every proxy.
class RoundRobinPolicy final : public Policy {
 public:
  std::string_view name() const override { return "round-robin"; }
  size_t pick(const RouteContext&, std::span<Candidate> c, Rng&) override {
    size_t i = next_++ % c.size();
    c[i].cost = 0;
    return i;
  }

 private:
  uint64_t next_ = 0;
};

class LeastRequestPolicy final : public Policy {
 public:
  std::string_view name() const override { return "least-request"; }
  size_t pick(const RouteContext&, std::span<Candidate> c, Rng& rng) override {
    for (Candidate& x : c) x.cost = in_flight(x);
    return pick_lowest_cost(c, rng);
  }
};

// Two distinct candidates at random, the one with fewer requests in flight (the first
// drawn on a tie). Close to least-request's balance without herding onto the one
// endpoint that looks idlest.
class PowerOfTwoPolicy final : public Policy {
 public:
  std::string_view name() const override { return "power-of-two"; }
  size_t pick(const RouteContext&, std::span<Candidate> c, Rng& rng) override {
    if (c.size() == 1) {
      c[0].cost = in_flight(c[0]);
      return 0;
    }
    size_t a = rng.below(c.size());
    size_t b = rng.below(c.size() - 1);
    if (b >= a) ++b;
    c[a].cost = in_flight(c[a]);
    c[b].cost = in_flight(c[b]);
    return c[b].cost < c[a].cost ? b : a;
  }
};

template <typename T>
Result<std::unique_ptr<Policy>> make(const PolicyConfig& config) {
  if (Status s = no_params(config); !s) return Error(s.error());
  return std::unique_ptr<Policy>(std::make_unique<T>());
}

}  // namespace

Result<std::unique_ptr<Policy>> make_random(const PolicyConfig& c, const Registry&) {
  return make<RandomPolicy>(c);
}
Result<std::unique_ptr<Policy>> make_round_robin(const PolicyConfig& c, const Registry&) {
  return make<RoundRobinPolicy>(c);
}
Result<std::unique_ptr<Policy>> make_least_request(const PolicyConfig& c, const Registry&) {
  return make<LeastRequestPolicy>(c);
}
Result<std::unique_ptr<Policy>> make_power_of_two(const PolicyConfig& c, const Registry&) {
  return make<PowerOfTwoPolicy>(c);
}

}  // namespace kvgate::route::builtin
