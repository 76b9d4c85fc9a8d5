// RequestClasses: the Gateway API Inference Extension's objective and fairness headers,
// mapped onto kvgate's priorities and flow control's tenants (docs/epp.md, "Objectives
// and fairness"). The Endpoint Picker only: `kvgate serve` reads x-kvgate-priority and
// API keys, as before.
//
//   x-gateway-inference-objective: NAME  -> the priority the config gives NAME (the
//       InferenceObjective's spec.priority), as route::criticality_from_priority reads
//       it: > 0 critical, 0 standard, < 0 sheddable. An unknown name, or none: the
//       request keeps what serve would give it (its key's priority, or standard).
//   x-gateway-inference-fairness-id: ID  -> the request's tenant in flow control's fair
//       queue and in the metrics, when the config has no API keys (with keys, the key's
//       tenant). At most `max_ids` distinct ids are kept; a new one past that, or one
//       that is not a short token, counts as no id.
//
//   RequestClasses classes({{"premium", 100}, {"batch", -1}}, 1000);
//   std::optional<int> p = classes.priority("premium");   // 100
//   std::string t = classes.fairness_id("team-a");        // "team-a"
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace kvgate::epp {

inline constexpr std::string_view kObjectiveHeader = "x-gateway-inference-objective";
inline constexpr std::string_view kFairnessHeader = "x-gateway-inference-fairness-id";

// The longest fairness id kept (longer: no id).
inline constexpr size_t kMaxFairnessIdBytes = 128;

class RequestClasses {
 public:
  RequestClasses() = default;
  RequestClasses(std::map<std::string, int, std::less<>> objectives, size_t max_ids)
      : objectives_(std::move(objectives)), max_ids_(max_ids) {}

  // The priority of an objective's name; nullopt for a name the config does not list.
  std::optional<int> priority(std::string_view objective) const;
  // The tenant name for a fairness id: the id itself, or "" (no id) when it is empty,
  // too long, has a byte outside [A-Za-z0-9._:/@-], or is new past `max_ids`.
  // Thread-safe: every stream's Exchange asks the one instance.
  std::string fairness_id(std::string_view id);
  // Distinct ids kept so far.
  size_t ids() const;

 private:
  std::map<std::string, int, std::less<>> objectives_;
  size_t max_ids_ = 0;
  mutable std::mutex mu_;
  std::set<std::string, std::less<>> ids_;
};

}  // namespace kvgate::epp
