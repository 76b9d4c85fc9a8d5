#include "core/kv/event_sequencer.h"

#include <gtest/gtest.h>

namespace kvgate::kv {
namespace {

TEST(EventSequencer, ClassifiesTheStream) {
  EventSequencer s;
  EXPECT_EQ(s.classify(5), SeqAction::kApply);  // joined mid-stream: take it
  s.accept(5);
  EXPECT_EQ(s.classify(6), SeqAction::kApply);
  s.accept(6);
  EXPECT_EQ(s.classify(6), SeqAction::kDuplicate);
  EXPECT_EQ(s.classify(9), SeqAction::kGap);
  EXPECT_EQ(s.expected(), 7u);
  EXPECT_EQ(s.classify(0), SeqAction::kRestart);
  s.accept(0);
  EXPECT_EQ(s.classify(1), SeqAction::kApply);
  s.reset();
  EXPECT_FALSE(s.expected());
  EXPECT_EQ(s.classify(42), SeqAction::kApply);
}

}  // namespace
}  // namespace kvgate::kv
