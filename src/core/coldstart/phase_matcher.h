// PhaseMatcher: turns one run's timestamped log lines into per-phase durations.
//
// Phases end in order. Each line is tested against the phases that have not ended yet;
// when it matches phase j, phase j ends at the line's time and any phases before j that
// never matched are recorded as missing (a vLLM started with --enforce-eager never logs
// torch.compile; its time then counts towards the next phase that is seen). A line that
// matches a phase that already ended is ignored: with tensor parallelism every worker
// logs "Graph capturing finished", and the first one ends the phase.
//
//   Result<PhaseMatcher> m = PhaseMatcher::compile(patterns);
//   m->feed(seconds(1.2), "INFO ... vLLM API server version 0.10.0");
//   std::vector<std::optional<Nanos>> d = m->durations();
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/coldstart/phase_patterns.h"
#include "core/common/result.h"
#include "core/common/time.h"

namespace kvgate::coldstart {

class PhaseMatcher {
 public:
  static Result<PhaseMatcher> compile(const PatternSet& patterns);

  // `at`: time since the launch. Lines must come in time order.
  void feed(Nanos at, std::string_view line);

  // Per phase, in the pattern set's order: when it ended (time since launch), if seen.
  const std::vector<std::optional<Nanos>>& end_times() const { return end_at_; }
  // Per phase: end minus the previous seen end (or the launch); nullopt if not seen.
  std::vector<std::optional<Nanos>> durations() const;
  bool all_seen() const;
  size_t phases() const { return end_at_.size(); }

 private:
  struct Compiled;  // the regexes (kept out of this header: <regex> is heavy)
  std::shared_ptr<const Compiled> compiled_;
  std::vector<std::optional<Nanos>> end_at_;
  size_t next_ = 0;  // phases before next_ have ended or been skipped
};

}  // namespace kvgate::coldstart
