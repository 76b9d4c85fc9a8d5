#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include "core/common/rng.h"

namespace kvgate::sim {
namespace {

TEST(EventQueue, PopsInTimeOrder) {
  EventQueue<int> q;
  q.push(30, 3);
  q.push(10, 1);
  q.push(20, 2);
  EXPECT_EQ(q.next_time(), 10);
  EXPECT_EQ(q.pop().payload, 1);
  EXPECT_EQ(q.pop().payload, 2);
  EXPECT_EQ(q.pop().payload, 3);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, EqualTimesPopInPushOrder) {
  EventQueue<int> q;
  for (int i = 0; i < 100; ++i) q.push(5, i);
  q.push(4, -1);
  EXPECT_EQ(q.pop().payload, -1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(q.pop().payload, i);
}

TEST(EventQueue, InterleavedPushPopIsDeterministic) {
  auto run = [] {
    EventQueue<uint64_t> q;
    Rng rng(3);
    std::vector<uint64_t> order;
    for (int i = 0; i < 1000; ++i) {
      q.push(static_cast<Nanos>(rng.below(50)), static_cast<uint64_t>(i));
      if (rng.below(3) == 0) {
        auto e = q.pop();
        order.push_back(e.payload);
        // An event scheduled "now" from a handler still goes after earlier ties.
        q.push(e.at, 10000 + e.payload);
      }
    }
    Nanos last = -1;
    uint64_t last_seq = 0;
    while (!q.empty()) {
      auto e = q.pop();
      EXPECT_TRUE(e.at > last || (e.at == last && e.seq > last_seq));
      last = e.at;
      last_seq = e.seq;
      order.push_back(e.payload);
    }
    return order;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace kvgate::sim
