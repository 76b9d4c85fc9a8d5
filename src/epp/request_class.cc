#include "epp/request_class.h"

namespace kvgate::epp {
namespace {

bool token_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '/' || c == '@' || c == '-';
}

}  // namespace

std::optional<int> RequestClasses::priority(std::string_view objective) const {
  const auto it = objectives_.find(objective);
  if (it == objectives_.end()) return std::nullopt;
  return it->second;
}

std::string RequestClasses::fairness_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxFairnessIdBytes) return {};
  for (char c : id) {
    if (!token_byte(c)) return {};
  }
  std::lock_guard lock(mu_);
  if (ids_.find(id) != ids_.end()) return std::string(id);
  if (ids_.size() >= max_ids_) return {};
  ids_.emplace(id);
  return std::string(id);
}

size_t RequestClasses::ids() const {
  std::lock_guard lock(mu_);
  return ids_.size();
}

}  // namespace kvgate::epp
