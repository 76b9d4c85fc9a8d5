// Helpers shared by the engine model tests: a driver loop and prompt builders.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

#include "core/engine/engine_model.h"

namespace kvgate::engine::testing {

// Drives an EngineModel in virtual time as the simulator does: step at
// next_step_time, advance to the step's end, repeat until idle.
struct Driver {
  explicit Driver(EngineModel& m) : model(m) {}

  // Runs one step (at the next step time, not before `now`); false when idle.
  bool step_once() {
    std::optional<Nanos> t = model.next_step_time(now);
    if (!t) return false;
    now = *t;
    model.step(now, last);
    steps.push_back(last);
    for (const RequestUpdate& u : last.updates) {
      tokens[u.id].push_back(u.token);
      if (u.output_index == 0) ttft[u.id] = u.ttft;
      if (u.finished) finished_at[u.id] = last.end();
    }
    now = last.end();
    return true;
  }

  void run_until_idle(size_t max_steps = 1'000'000) {
    for (size_t i = 0; i < max_steps && step_once(); ++i) {
    }
    ASSERT_FALSE(model.next_step_time(now).has_value()) << "engine did not go idle";
  }

  EngineModel& model;
  Nanos now = 0;
  StepResult last;
  std::vector<StepResult> steps;
  std::map<RequestId, std::vector<kv::TokenId>> tokens;
  std::map<RequestId, Nanos> ttft;
  std::map<RequestId, Nanos> finished_at;
};

// `n` tokens starting at `first`, counting up: distinct prompts for distinct `first`.
inline std::vector<kv::TokenId> tokens(uint32_t n, uint32_t first = 1000) {
  std::vector<kv::TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

inline EngineRequest request(RequestId id, std::vector<kv::TokenId> prompt, uint32_t max_tokens,
                             int32_t priority = 0) {
  EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.priority = priority;
  return r;
}

// A profile whose step time is easy to reason about: 1 ms per step plus 1 us per
// computed token, no preprocessing.
inline Profile simple_profile(uint32_t num_blocks, uint32_t block_size = 16) {
  Profile p;
  p.name = "test";
  p.step_overhead_s = 0.001;
  p.linear_s_per_token = 1e-6;
  p.num_gpu_blocks = num_blocks;
  p.block_size = block_size;
  p.max_model_len = 1 << 20;
  return p;
}

// Equivalence tests (two engines in lockstep). step_both: both step at their next step
// time into ra and rb; false when they are idle (or disagree on when to step: a failure).
inline bool step_both(EngineModel& a, EngineModel& b, Nanos now, StepResult& ra, StepResult& rb) {
  const std::optional<Nanos> ta = a.next_step_time(now), tb = b.next_step_time(now);
  EXPECT_EQ(ta, tb);
  if (!ta || ta != tb) return false;
  a.step(*ta, ra);
  b.step(*tb, rb);
  return true;
}

// A step's shape and events, and one update.
inline void expect_same_step_shape(const StepResult& a, const StepResult& b) {
  ASSERT_EQ(a.start, b.start);
  ASSERT_EQ(a.duration, b.duration);
  EXPECT_EQ(a.scheduled_seqs, b.scheduled_seqs);
  EXPECT_EQ(a.prefill_tokens, b.prefill_tokens);
  EXPECT_EQ(a.decode_seqs, b.decode_seqs);
  EXPECT_EQ(a.preempted, b.preempted);
  // BlockStored carries every block's tokens: blocks across the prompt's end included.
  EXPECT_EQ(a.kv_events, b.kv_events);
}

inline void expect_same_update(const RequestUpdate& a, const RequestUpdate& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.output_index, b.output_index);
  EXPECT_EQ(a.finished, b.finished);
  EXPECT_EQ(a.ttft, b.ttft);
  EXPECT_EQ(a.itl, b.itl);
  EXPECT_EQ(a.e2e, b.e2e);
  EXPECT_EQ(a.queue_time, b.queue_time);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.cached_tokens, b.cached_tokens);
}

}  // namespace kvgate::engine::testing
