#include "core/route/registry.h"

#include <fmt/format.h>

#include "core/route/builtins.h"

namespace kvgate::route {
namespace {

template <typename T, typename Map>
Result<std::unique_ptr<T>> make(const Map& map, const PolicyConfig& config, const Registry& r,
                                std::string_view kind) {
  auto it = map.find(config.name);
  if (it == map.end()) {
    std::string known;
    for (const auto& [name, factory] : map) known += (known.empty() ? "" : ", ") + name;
    return Error(fmt::format("unknown {} '{}' (known: {})", kind, config.name, known));
  }
  return it->second(config, r);
}

template <typename Map>
std::vector<std::string> names(const Map& map) {
  std::vector<std::string> out;
  for (const auto& [name, factory] : map) out.push_back(name);
  return out;
}

}  // namespace

Registry Registry::with_builtins() {
  Registry r;
  register_builtins(r);
  return r;
}

void Registry::add_filter(std::string name, Factory<Filter> factory) {
  filters_[std::move(name)] = std::move(factory);
}
void Registry::add_policy(std::string name, Factory<Policy> factory) {
  policies_[std::move(name)] = std::move(factory);
}
void Registry::add_scorer(std::string name, Factory<Scorer> factory) {
  scorers_[std::move(name)] = std::move(factory);
}

Result<std::unique_ptr<Filter>> Registry::make_filter(const PolicyConfig& config) const {
  return make<Filter>(filters_, config, *this, "filter");
}
Result<std::unique_ptr<Policy>> Registry::make_policy(const PolicyConfig& config) const {
  return make<Policy>(policies_, config, *this, "policy");
}
Result<std::unique_ptr<Scorer>> Registry::make_scorer(const PolicyConfig& config) const {
  return make<Scorer>(scorers_, config, *this, "scorer");
}

std::vector<std::string> Registry::filter_names() const { return names(filters_); }
std::vector<std::string> Registry::policy_names() const { return names(policies_); }
std::vector<std::string> Registry::scorer_names() const { return names(scorers_); }

void register_builtins(Registry& r) {
  r.add_filter("healthy", builtin::make_healthy_filter);
  r.add_filter("saturation", builtin::make_saturation_filter);
  r.add_policy("random", builtin::make_random);
  r.add_policy("round-robin", builtin::make_round_robin);
  r.add_policy("least-request", builtin::make_least_request);
  r.add_policy("power-of-two", builtin::make_power_of_two);
  r.add_policy("load", builtin::make_load);
  r.add_policy("approx-prefix", builtin::make_approx_prefix);
  r.add_policy("kv-cost", builtin::make_kv_cost);
  r.add_policy("scorers", builtin::make_scorers);
  r.add_scorer("queue", builtin::make_queue_scorer);
  r.add_scorer("kv-utilization", builtin::make_kv_utilization_scorer);
  r.add_scorer("prefix", builtin::make_prefix_scorer);
}

}  // namespace kvgate::route
