// EventSequencer: keeps one endpoint's KV event stream in order.
//
// vLLM numbers its event batches 0, 1, 2, ... per process (the counter restarts at 0 when
// the engine restarts). A batch lost on the way (ZeroMQ PUB drops when a subscriber is
// slow or reconnects) means the prefix index no longer knows what that endpoint holds.
// The sequencer says what to do with each arriving batch:
//   kApply      the expected next batch (or the first one seen);
//   kDuplicate  already applied (a replay overlapping the live stream): drop it;
//   kGap        batches are missing: ask the engine's replay socket for them, or, without
//               one, clear the endpoint's entries and rebuild from here on;
//   kRestart    the engine restarted (sequence back to 0): clear, then apply.
// Pure logic; the subscriber (io/kv_event_subscriber.h) acts on the answers.
#pragma once

#include <cstdint>
#include <optional>

namespace kvgate::kv {

enum class SeqAction : uint8_t { kApply, kDuplicate, kGap, kRestart };

struct SequenceStats {
  uint64_t batches = 0;  // applied
  uint64_t gaps = 0;     // gaps detected
  uint64_t missed = 0;   // batches known lost (sum of gap sizes not recovered)
  uint64_t restarts = 0;
  uint64_t duplicates = 0;
  uint64_t replays = 0;   // replay requests sent
  uint64_t replayed = 0;  // batches recovered through replay
  uint64_t decode_errors = 0;
  // Not a counter: the batch sequence number expected next (0 before the first batch).
  uint64_t next_sequence = 0;
};

class EventSequencer {
 public:
  // Classifies batch `seq`. For kApply and kRestart the batch is taken as applied (the
  // next expected becomes seq + 1); for kGap the caller decides (accept_after_gap or a
  // replay, then accept for each batch it applies).
  SeqAction classify(uint64_t seq) {
    if (!next_) return SeqAction::kApply;
    if (seq == *next_) return SeqAction::kApply;
    if (seq == 0) return SeqAction::kRestart;
    if (seq < *next_) return SeqAction::kDuplicate;
    return SeqAction::kGap;
  }

  // Records that batch `seq` was applied.
  void accept(uint64_t seq) { next_ = seq + 1; }

  // The batch the stream should deliver next, if any was seen.
  std::optional<uint64_t> expected() const { return next_; }

  // Forgets the position (after clearing the endpoint: take whatever comes next).
  void reset() { next_.reset(); }

 private:
  std::optional<uint64_t> next_;
};

}  // namespace kvgate::kv
