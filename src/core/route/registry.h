// Registry: filters, policies and scorers by name.
//
// Registration is explicit (kvgate_lib is a static library, so self-registering static
// objects would be dropped by the linker): register_builtins() adds kvgate's own, and
// an embedder may add more before building a Router.
//
//   Registry registry = Registry::with_builtins();
//   Result<std::unique_ptr<Policy>> p = registry.make_policy({"kv-cost", {}});
//
// Built-in policies (docs/router.md has their parameters):
//   random, round-robin, least-request, power-of-two, load, approx-prefix, kv-cost,
//   scorers (weighted Gateway-API-Inference-Extension-style scorers).
// Built-in filters: healthy, saturation.
// Built-in scorers: queue, kv-utilization, prefix.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/route/config.h"
#include "core/route/policy.h"

namespace kvgate::route {

class Registry;

template <typename T>
using Factory = std::function<Result<std::unique_ptr<T>>(const PolicyConfig&, const Registry&)>;

class Registry {
 public:
  // An empty registry, and one holding every built-in.
  Registry() = default;
  static Registry with_builtins();

  // Replaces an existing entry of the same name.
  void add_filter(std::string name, Factory<Filter> factory);
  void add_policy(std::string name, Factory<Policy> factory);
  void add_scorer(std::string name, Factory<Scorer> factory);

  // Error for an unknown name or bad parameters (the factory's message).
  Result<std::unique_ptr<Filter>> make_filter(const PolicyConfig& config) const;
  Result<std::unique_ptr<Policy>> make_policy(const PolicyConfig& config) const;
  Result<std::unique_ptr<Scorer>> make_scorer(const PolicyConfig& config) const;

  std::vector<std::string> filter_names() const;
  std::vector<std::string> policy_names() const;
  std::vector<std::string> scorer_names() const;

 private:
  std::map<std::string, Factory<Filter>, std::less<>> filters_;
  std::map<std::string, Factory<Policy>, std::less<>> policies_;
  std::map<std::string, Factory<Scorer>, std::less<>> scorers_;
};

// Adds kvgate's built-in filters, policies and scorers to `registry`.
void register_builtins(Registry& registry);

}  // namespace kvgate::route
