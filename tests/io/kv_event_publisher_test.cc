#include "io/kv_event_publisher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <zmq.hpp>

#include "../integration/support/eventually.h"

namespace kvgate::io {
namespace {

uint64_t be64(const zmq::message_t& m) {
  uint64_t v = 0;
  for (size_t i = 0; i < m.size(); ++i) v = (v << 8) | static_cast<const uint8_t*>(m.data())[i];
  return v;
}

TEST(KvEventPublisher, BindRule) {
  EXPECT_TRUE(publisher_binds("tcp://*:5557"));
  EXPECT_TRUE(publisher_binds("tcp://[::]:5557"));
  EXPECT_TRUE(publisher_binds("ipc:///tmp/x"));
  EXPECT_TRUE(publisher_binds("inproc://x"));
  EXPECT_FALSE(publisher_binds("tcp://10.0.0.1:5557"));
}

TEST(KvEventPublisher, ThreeFramesWithBigEndianSequenceAndReplay) {
  KvEventPublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.topic = "kv";
  o.buffer_steps = 3;
  auto pub = KvEventPublisher::start(o);
  ASSERT_TRUE(pub) << pub.error();
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.connect((*pub)->endpoint());
  // Slow joiner: publish probes until the subscription is in place.
  zmq::message_t topic, seq, payload;
  int probes = 0;
  while (true) {
    (*pub)->publish("probe" + std::to_string(probes++));
    sub.set(zmq::sockopt::rcvtimeo, 20);
    if (sub.recv(topic)) break;
    ASSERT_LT(probes, 500);
  }
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  ASSERT_TRUE(topic.more());
  EXPECT_EQ(topic.to_string(), "kv");
  ASSERT_TRUE(sub.recv(seq));
  ASSERT_TRUE(sub.recv(payload));
  EXPECT_EQ(seq.size(), 8u);
  EXPECT_FALSE(payload.more());
  const uint64_t first = be64(seq);
  EXPECT_EQ(payload.to_string(), "probe" + std::to_string(first));
  // The remaining probes (if any) come in order, then our five.
  for (int i = 0; i < 5; ++i) (*pub)->publish("batch" + std::to_string(i));
  uint64_t last = first;
  std::string last_payload;
  while (last_payload != "batch4") {
    ASSERT_TRUE(sub.recv(topic));
    ASSERT_TRUE(sub.recv(seq));
    ASSERT_TRUE(sub.recv(payload));
    EXPECT_EQ(be64(seq), last + 1);
    last = be64(seq);
    last_payload = payload.to_string();
  }
  // The publisher thread counts a batch once it is sent, so the count may trail what a
  // fast subscriber already received by a moment.
  testing::eventually([&] { return (*pub)->published() == last + 1; }, std::chrono::seconds(1),
                      std::chrono::milliseconds(5));
  EXPECT_EQ((*pub)->published(), last + 1);

  // Replay from seq 0: only the last buffer_steps (3) batches remain.
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect((*pub)->replay_endpoint());
  std::string start(8, '\0');
  (void)dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  (void)dealer.send(zmq::buffer(start), zmq::send_flags::none);
  std::vector<std::string> got;
  while (true) {
    zmq::message_t empty, s, p;
    ASSERT_TRUE(dealer.recv(empty));
    EXPECT_EQ(empty.size(), 0u);
    ASSERT_TRUE(dealer.recv(s));
    ASSERT_TRUE(dealer.recv(p));
    if (s.to_string() == std::string(8, '\xff')) {
      EXPECT_EQ(p.size(), 0u);
      break;
    }
    got.push_back(p.to_string());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"batch2", "batch3", "batch4"}));
}

TEST(KvEventPublisher, DropEveryWithholdsEveryNthBatchFromTheWireButReplaysIt) {
  KvEventPublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.drop_every = 3;  // seq 2, 5, 8, ... never go out
  auto pub = KvEventPublisher::start(o);
  ASSERT_TRUE(pub) << pub.error();
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.connect((*pub)->endpoint());
  zmq::message_t topic, seq, payload;
  int probes = 0;
  while (true) {  // slow joiner
    (*pub)->publish("probe" + std::to_string(probes++));
    sub.set(zmq::sockopt::rcvtimeo, 20);
    if (sub.recv(topic)) break;
    ASSERT_LT(probes, 500);
  }
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  ASSERT_TRUE(sub.recv(seq));
  ASSERT_TRUE(sub.recv(payload));
  std::vector<uint64_t> seen = {be64(seq)};
  for (int i = 0; i < 6; ++i) (*pub)->publish("batch" + std::to_string(i));
  const uint64_t end = static_cast<uint64_t>(probes) + 6;  // sequence numbers 0 .. end-1
  while (true) {
    sub.set(zmq::sockopt::rcvtimeo, 200);
    if (!sub.recv(topic)) break;  // nothing more: the last ones may be withheld
    ASSERT_TRUE(sub.recv(seq));
    ASSERT_TRUE(sub.recv(payload));
    seen.push_back(be64(seq));
  }
  for (uint64_t s : seen) EXPECT_NE(s % 3, 2u) << s;
  for (uint64_t s = seen.front(); s < end; ++s) {
    if (s % 3 != 2) {
      EXPECT_NE(std::find(seen.begin(), seen.end(), s), seen.end()) << s;
    }
  }
  // Waits for the publisher thread's count, which may trail what was received.
  testing::eventually([&] { return (*pub)->published() == end; }, std::chrono::seconds(1),
                      std::chrono::milliseconds(5));
  EXPECT_EQ((*pub)->published(), end);
  EXPECT_EQ((*pub)->dropped(), end / 3);

  // The withheld batches are in the replay buffer like every other.
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect((*pub)->replay_endpoint());
  (void)dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  (void)dealer.send(zmq::buffer(std::string(8, '\0')), zmq::send_flags::none);
  uint64_t replayed = 0;
  while (true) {
    zmq::message_t empty, s, p;
    ASSERT_TRUE(dealer.recv(empty));
    ASSERT_TRUE(dealer.recv(s));
    ASSERT_TRUE(dealer.recv(p));
    if (s.to_string() == std::string(8, '\xff')) break;
    EXPECT_EQ(be64(s), replayed++);
  }
  EXPECT_EQ(replayed, end);
}

TEST(KvEventPublisher, ConnectModeReachesABoundSubscriber) {
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.bind("tcp://127.0.0.1:*");
  const std::string ep = sub.get(zmq::sockopt::last_endpoint);
  KvEventPublisherOptions o;
  o.endpoint = ep;
  auto pub = KvEventPublisher::start(o);
  ASSERT_TRUE(pub) << pub.error();
  zmq::message_t m;
  int probes = 0;
  while (true) {
    (*pub)->publish("x");
    sub.set(zmq::sockopt::rcvtimeo, 20);
    if (sub.recv(m)) break;
    ASSERT_LT(++probes, 500);
  }
  EXPECT_EQ(m.size(), 0u);  // the empty default topic
}

TEST(KvEventPublisher, BadEndpointIsAnError) {
  KvEventPublisherOptions o;
  o.endpoint = "nonsense://*";
  EXPECT_FALSE(KvEventPublisher::start(o));
}

}  // namespace
}  // namespace kvgate::io
