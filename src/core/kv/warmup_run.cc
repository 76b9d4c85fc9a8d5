#include "core/kv/warmup_run.h"

#include <algorithm>

namespace kvgate::kv {

WarmupRun::WarmupRun(std::vector<HotPrefix> set, const WarmupConfig& config, Nanos started)
    : set_(std::move(set)),
      state_(set_.size(), State::kPending),
      concurrency_(std::max<uint32_t>(1, config.concurrency)),
      started_(started),
      deadline_(started + std::max<Nanos>(0, config.budget)) {
  stats_.planned = static_cast<uint32_t>(set_.size());
}

std::vector<size_t> WarmupRun::next(Nanos now) {
  std::vector<size_t> out;
  if (finished(now)) return out;
  while (next_ < set_.size() && in_flight_ < concurrency_) {
    state_[next_] = State::kInFlight;
    ++in_flight_;
    ++stats_.sent;
    out.push_back(next_++);
  }
  return out;
}

void WarmupRun::done(size_t index, const WarmupResult& result) {
  if (index >= state_.size() || state_[index] != State::kInFlight) return;
  state_[index] = State::kDone;
  --in_flight_;
  ++answered_;
  if (result.ok) {
    ++stats_.succeeded;
    stats_.tokens_warmed += result.prompt_tokens;
    stats_.tokens_cached += result.cached_tokens;
  } else {
    ++stats_.failed;
  }
}

bool WarmupRun::finished(Nanos now) {
  if (finished_) return true;
  if (answered_ == set_.size()) {
    finished_ = true;
  } else if (now >= deadline_) {
    finished_ = true;
    stats_.timed_out = true;
  }
  return finished_;
}

}  // namespace kvgate::kv
