#include "core/coldstart/phase_matcher.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside <regex> at -O1 with sanitizers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <regex>
#include <string>

namespace kvgate::coldstart {

struct PhaseMatcher::Compiled {
  std::vector<std::vector<std::regex>> regexes;
};

Result<PhaseMatcher> PhaseMatcher::compile(const PatternSet& patterns) {
  PhaseMatcher m;
  auto compiled = std::make_shared<Compiled>();
  for (const PhasePattern& phase : patterns.phases) {
    std::vector<std::regex> list;
    for (const std::string& re : phase.end_regexes) {
      try {
        list.emplace_back(re, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        return Error("phase '" + phase.name + "': bad regex '" + re + "': " + e.what());
      }
    }
    compiled->regexes.push_back(std::move(list));
  }
  m.end_at_.assign(compiled->regexes.size(), std::nullopt);
  m.compiled_ = std::move(compiled);
  return m;
}

void PhaseMatcher::feed(Nanos at, std::string_view line) {
  const auto& regexes = compiled_->regexes;
  for (size_t j = next_; j < regexes.size(); ++j) {
    for (const std::regex& re : regexes[j]) {
      if (std::regex_search(line.begin(), line.end(), re)) {
        end_at_[j] = at;
        next_ = j + 1;
        return;
      }
    }
  }
}

std::vector<std::optional<Nanos>> PhaseMatcher::durations() const {
  std::vector<std::optional<Nanos>> out(end_at_.size());
  Nanos previous = 0;
  for (size_t j = 0; j < end_at_.size(); ++j) {
    if (!end_at_[j]) continue;
    out[j] = *end_at_[j] - previous;
    previous = *end_at_[j];
  }
  return out;
}

bool PhaseMatcher::all_seen() const {
  for (const auto& t : end_at_) {
    if (!t) return false;
  }
  return true;
}

}  // namespace kvgate::coldstart
