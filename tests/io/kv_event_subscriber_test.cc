// The subscriber against real ZeroMQ sockets on loopback, playing the engine's side the
// way vLLM's ZmqEventPublisher does (PUB + replay ROUTER, 3-frame messages).
#include "io/kv_event_subscriber.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "../integration/support/eventually.h"

namespace kvgate::io {
namespace {

using namespace std::chrono_literals;

std::string seq_frame(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(v & 0xFF);
  return s;
}

// A batch whose one event names its sequence number, so order can be checked.
std::string batch_payload(uint64_t n) {
  kv::EventBatch b;
  b.ts = 1.5;
  b.events.push_back(kv::BlockRemoved{{1000 + n}, std::string("GPU")});
  return kv::encode_event_batch(b, kv::EventFormat::kArray);
}

uint64_t tag_of(const kv::EventBatch& b) {
  return std::get<kv::BlockRemoved>(b.events.at(0)).block_hashes.at(0) - 1000;
}

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<bool, uint64_t>> seen;  // (cleared before, tag); tag ~0 = clear only
  size_t clears = 0;

  void add(KvEventDelivery d) {
    std::lock_guard lock(mu);
    if (d.clear_first) ++clears;
    if (d.batches.empty()) seen.push_back({d.clear_first, ~uint64_t{0}});
    bool first = true;
    for (auto& b : d.batches) {
      seen.push_back({d.clear_first && first, tag_of(b)});
      first = false;
    }
    cv.notify_all();
  }
  bool wait_for(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 5s, [&] { return seen.size() >= n; });
  }
  // The batches' tags in delivery order (clear-only deliveries left out).
  std::vector<uint64_t> tags() {
    std::lock_guard lock(mu);
    std::vector<uint64_t> t;
    for (auto& [c, tag] : seen) {
      if (tag != ~uint64_t{0}) t.push_back(tag);
    }
    return t;
  }
};

class Engine {
 public:
  explicit Engine(zmq::context_t& ctx)
      : pub_(ctx, zmq::socket_type::xpub), replay_(ctx, zmq::socket_type::router) {
    pub_.set(zmq::sockopt::linger, 0);
    replay_.set(zmq::sockopt::linger, 0);
    pub_.bind("tcp://127.0.0.1:*");
    replay_.bind("tcp://127.0.0.1:*");
  }
  std::string pub_url() { return pub_.get(zmq::sockopt::last_endpoint); }
  std::string replay_url() { return replay_.get(zmq::sockopt::last_endpoint); }
  // XPUB sees the subscription once the subscriber is connected: no lost first batches.
  bool wait_subscriber() {
    pub_.set(zmq::sockopt::rcvtimeo, 5000);
    zmq::message_t m;
    return pub_.recv(m).has_value();
  }
  void publish(uint64_t seq, const std::string& payload, const std::string& topic = "") {
    const std::string seq_bytes = seq_frame(seq);
    std::array<zmq::const_buffer, 3> f{zmq::buffer(topic), zmq::buffer(seq_bytes),
                                       zmq::buffer(payload)};
    zmq::send_multipart(pub_, f);
  }
  // Serves one replay request from `batches` (seq -> payload); returns the start asked.
  uint64_t serve_replay(const std::map<uint64_t, std::string>& batches) {
    replay_.set(zmq::sockopt::rcvtimeo, 5000);
    std::vector<zmq::message_t> req;
    if (!zmq::recv_multipart(replay_, std::back_inserter(req))) return ~uint64_t{0};
    // [client id, "", start]
    std::string start = req.at(2).to_string();
    uint64_t from = 0;
    for (unsigned char c : start) from = from << 8 | c;
    const std::string empty;
    for (const auto& [s, p] : batches) {
      if (s < from) continue;
      const std::string seq_bytes = seq_frame(s);
      std::array<zmq::const_buffer, 4> f{zmq::buffer(req[0].data(), req[0].size()),
                                         zmq::buffer(empty), zmq::buffer(seq_bytes),
                                         zmq::buffer(p)};
      zmq::send_multipart(replay_, f);
    }
    const std::string end_seq(8, '\xff');
    std::array<zmq::const_buffer, 4> end{zmq::buffer(req[0].data(), req[0].size()),
                                         zmq::buffer(empty), zmq::buffer(end_seq),
                                         zmq::buffer(empty)};
    zmq::send_multipart(replay_, end);
    return from;
  }

 private:
  zmq::socket_t pub_;
  zmq::socket_t replay_;
};

struct Fixture {
  zmq::context_t ctx{1};
  Engine engine{ctx};
  Collected got;
  std::unique_ptr<KvEventSubscriber> sub;

  explicit Fixture(bool with_replay) {
    auto s = KvEventSubscriber::create({}, [this](KvEventDelivery d) { got.add(std::move(d)); });
    EXPECT_TRUE(s.ok());
    sub = std::move(*s);
    sub->add_source({.endpoint = 3,
                     .publisher = engine.pub_url(),
                     .replay = with_replay ? engine.replay_url() : ""});
    EXPECT_TRUE(engine.wait_subscriber());
  }
};

TEST(KvEventSubscriber, DeliversInOrder) {
  Fixture f(false);
  for (uint64_t i = 0; i < 5; ++i) f.engine.publish(i, batch_payload(i));
  ASSERT_TRUE(f.got.wait_for(5));
  EXPECT_EQ(f.got.tags(), (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(f.got.clears, 0u);
}

TEST(KvEventSubscriber, GapWithoutReplayClearsAndGoesOn) {
  Fixture f(false);
  f.engine.publish(0, batch_payload(0));
  f.engine.publish(1, batch_payload(1));
  f.engine.publish(4, batch_payload(4));  // 2 and 3 lost
  ASSERT_TRUE(f.got.wait_for(3));
  EXPECT_EQ(f.got.tags(), (std::vector<uint64_t>{0, 1, 4}));
  EXPECT_EQ(f.got.clears, 1u);
  // The counts settle on the subscriber's thread, after the delivery.
  testing::eventually([&] { return f.sub->stats(3).missed != 0; }, 1s);
  EXPECT_EQ(f.sub->stats(3).gaps, 1u);
  EXPECT_EQ(f.sub->stats(3).missed, 2u);
}

TEST(KvEventSubscriber, GapIsFilledFromTheReplaySocket) {
  Fixture f(true);
  std::map<uint64_t, std::string> history;
  for (uint64_t i = 0; i < 5; ++i) history[i] = batch_payload(i);
  f.engine.publish(0, history[0]);
  f.engine.publish(1, history[1]);
  f.engine.publish(4, history[4]);  // 2 and 3 lost on the way
  EXPECT_EQ(f.engine.serve_replay(history), 2u);
  f.engine.publish(5, batch_payload(5));
  ASSERT_TRUE(f.got.wait_for(6));
  EXPECT_EQ(f.got.tags(), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(f.got.clears, 0u);
  // The counts settle on the subscriber's thread: wait for the last of them (a loaded
  // machine showed the duplicate counted after the replayed events).
  testing::eventually(
      [&] {
        const auto st = f.sub->stats(3);
        return st.replayed >= 3 && st.duplicates >= 1;
      },
      3s);
  EXPECT_EQ(f.sub->stats(3).replays, 1u);
  EXPECT_EQ(f.sub->stats(3).replayed, 3u);    // 2, 3 and 4 (the replay serves from 2 on)
  EXPECT_EQ(f.sub->stats(3).duplicates, 1u);  // the live 4 held back during the replay
}

TEST(KvEventSubscriber, RestartAndMalformedPayloadClear) {
  Fixture f(false);
  f.engine.publish(0, batch_payload(0));
  f.engine.publish(1, batch_payload(1));
  f.engine.publish(0, batch_payload(7));  // the engine restarted
  f.engine.publish(1, "\xc1garbage");     // 0xc1 is never valid msgpack
  f.engine.publish(2, batch_payload(8));
  ASSERT_TRUE(f.got.wait_for(4));
  // wait_for() counted the clear-only deliveries too: wait for the fourth batch.
  testing::eventually([&] { return f.got.tags().size() >= 4; }, 1s);
  EXPECT_EQ(f.got.tags(), (std::vector<uint64_t>{0, 1, 7, 8}));
  EXPECT_EQ(f.got.clears, 2u);  // the restart, then the unreadable batch
  testing::eventually([&] { return f.sub->stats(3).decode_errors != 0; }, 1s);
  EXPECT_EQ(f.sub->stats(3).restarts, 1u);
  EXPECT_EQ(f.sub->stats(3).decode_errors, 1u);
}

TEST(KvEventSubscriber, BindModeRoutesByTopic) {
  zmq::context_t ctx{1};
  Collected got;
  auto s = KvEventSubscriber::create({.bind_url = "tcp://127.0.0.1:*"},
                                     [&](KvEventDelivery d) { got.add(std::move(d)); });
  ASSERT_TRUE(s.ok()) << s.error();
  const std::string url = (*s)->bound_endpoint();
  (*s)->add_source({.endpoint = 7, .topic = "engine-7"});
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  pub.set(zmq::sockopt::linger, 0);
  pub.set(zmq::sockopt::rcvtimeo, 5000);
  pub.connect(url);
  zmq::message_t subscription;
  ASSERT_TRUE(pub.recv(subscription).has_value());
  // Lets the subscriber thread register the topic (it takes add_source() up at its next
  // poll, within 20 ms): the subscriber shows nothing to poll for until a batch is applied.
  std::this_thread::sleep_for(50ms);
  const std::string topic = "engine-7", unknown = "unknown";
  for (uint64_t i = 0; i < 3; ++i) {
    const std::string seq = seq_frame(i), payload = batch_payload(i);
    std::array<zmq::const_buffer, 3> fr{zmq::buffer(topic), zmq::buffer(seq), zmq::buffer(payload)};
    zmq::send_multipart(pub, fr);
  }
  const std::string seq0 = seq_frame(0), payload9 = batch_payload(9);
  std::array<zmq::const_buffer, 3> other{zmq::buffer(unknown), zmq::buffer(seq0),
                                         zmq::buffer(payload9)};
  zmq::send_multipart(pub, other);
  ASSERT_TRUE(got.wait_for(3));
  // A negative check: nothing more (the unknown topic's batch) comes within 50 ms; there is
  // no event to wait for.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(got.tags(), (std::vector<uint64_t>{0, 1, 2}));
}

TEST(KvEventSubscriber, BadBindAddressIsAnError) {
  auto s = KvEventSubscriber::create({.bind_url = "tcp://256.1.1.1:1"}, [](KvEventDelivery) {});
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace kvgate::io
