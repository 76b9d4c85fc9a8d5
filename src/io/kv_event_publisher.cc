#include "io/kv_event_publisher.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <zmq.hpp>

namespace kvgate::io {
namespace {

std::string seq_bytes(uint64_t seq) {
  std::string b(8, '\0');
  for (int i = 7; i >= 0; --i) {
    b[static_cast<size_t>(i)] = static_cast<char>(seq & 0xff);
    seq >>= 8;
  }
  return b;
}

uint64_t read_seq(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const uint8_t*>(m.data());
  for (size_t i = 0; i < m.size() && i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

std::string last_endpoint(zmq::socket_t& s) { return s.get(zmq::sockopt::last_endpoint); }

}  // namespace

bool publisher_binds(std::string_view endpoint) {
  return endpoint.find('*') != std::string_view::npos ||
         endpoint.find("::") != std::string_view::npos || endpoint.starts_with("ipc://") ||
         endpoint.starts_with("inproc://");
}

struct KvEventPublisher::Impl {
  KvEventPublisherOptions options;
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
  zmq::socket_t in_send{ctx, zmq::socket_type::pair};  // publish() side, under send_mu
  zmq::socket_t in_recv{ctx, zmq::socket_type::pair};  // thread side
  std::mutex send_mu;
  std::thread thread;
  std::string endpoint;
  std::string replay_endpoint;
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> dropped{0};
  std::deque<std::pair<uint64_t, std::string>> buffer;  // thread only

  void run();
  void send_batch(std::string&& payload);
  void serve_replay();
};

void KvEventPublisher::Impl::send_batch(std::string&& payload) {
  const uint64_t seq = published.load(std::memory_order_relaxed);
  const std::string seq8 = seq_bytes(seq);
  if (options.drop_every > 0 && (seq + 1) % options.drop_every == 0) {
    dropped.fetch_add(1, std::memory_order_relaxed);  // lost on the way, kept for replay
  } else {
    // PUB never blocks: at the high-water mark ZeroMQ drops the message.
    (void)pub.send(zmq::buffer(options.topic), zmq::send_flags::sndmore);
    (void)pub.send(zmq::buffer(seq8), zmq::send_flags::sndmore);
    (void)pub.send(zmq::buffer(payload), zmq::send_flags::none);
  }
  published.store(seq + 1, std::memory_order_release);
  if (options.buffer_steps == 0) return;
  if (buffer.size() >= options.buffer_steps) buffer.pop_front();
  buffer.emplace_back(seq, std::move(payload));
}

void KvEventPublisher::Impl::serve_replay() {
  std::vector<zmq::message_t> frames;
  while (true) {
    zmq::message_t m;
    if (!replay->recv(m, zmq::recv_flags::dontwait)) return;
    const bool more = m.more();
    frames.push_back(std::move(m));
    if (!more) break;
  }
  // [client id, "", start seq]: anything else is ignored, as vLLM does.
  if (frames.size() != 3) return;
  const uint64_t start = read_seq(frames[2]);
  const std::string id(static_cast<const char*>(frames[0].data()), frames[0].size());
  auto send = [&](std::string_view seq8, std::string_view payload) {
    (void)replay->send(zmq::buffer(id), zmq::send_flags::sndmore);
    (void)replay->send(zmq::message_t(), zmq::send_flags::sndmore);
    (void)replay->send(zmq::buffer(seq8), zmq::send_flags::sndmore);
    (void)replay->send(zmq::buffer(payload), zmq::send_flags::none);
  };
  for (const auto& [seq, payload] : buffer) {
    if (seq >= start) send(seq_bytes(seq), payload);
  }
  send(std::string(8, '\xff'), "");
}

void KvEventPublisher::Impl::run() {
  std::vector<zmq::pollitem_t> items;
  items.push_back({in_recv.handle(), 0, ZMQ_POLLIN, 0});
  if (replay) items.push_back({replay->handle(), 0, ZMQ_POLLIN, 0});
  while (true) {
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
    // Batches queued before a replay request are published (and buffered) first: a client
    // that asks for a replay after a response was delivered sees that response's events.
    while (true) {
      zmq::message_t m;
      if (!in_recv.recv(m, zmq::recv_flags::dontwait)) break;
      if (m.size() == 0) return;  // stop marker, after everything queued before it
      send_batch(m.to_string());
    }
    if (items.size() > 1 && (items[1].revents & ZMQ_POLLIN)) serve_replay();
  }
}

KvEventPublisher::KvEventPublisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::start(
    const KvEventPublisherOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  try {
    impl->pub.set(zmq::sockopt::sndhwm, options.hwm);
    impl->pub.set(zmq::sockopt::linger, 0);
    if (publisher_binds(options.endpoint)) {
      impl->pub.bind(options.endpoint);
      impl->endpoint = last_endpoint(impl->pub);
    } else {
      impl->pub.connect(options.endpoint);
      impl->endpoint = options.endpoint;
    }
    if (options.replay_endpoint && !options.replay_endpoint->empty()) {
      impl->replay.emplace(impl->ctx, zmq::socket_type::router);
      impl->replay->set(zmq::sockopt::linger, 0);
      impl->replay->bind(*options.replay_endpoint);
      impl->replay_endpoint = last_endpoint(*impl->replay);
    }
    static std::atomic<uint64_t> counter{0};
    const std::string inproc = "inproc://kvgate-kv-publisher-" + std::to_string(counter++);
    impl->in_recv.set(zmq::sockopt::rcvhwm, 0);
    impl->in_send.set(zmq::sockopt::sndhwm, 0);
    impl->in_recv.bind(inproc);
    impl->in_send.connect(inproc);
  } catch (const zmq::error_t& e) {
    return Error("KV event publisher on " + options.endpoint +
                 (options.replay_endpoint ? " (replay " + *options.replay_endpoint + ")" : "") +
                 ": " + e.what());
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    try {
      raw->run();
    } catch (const zmq::error_t&) {
      // Context terminated: nothing left to publish.
    }
  });
  return std::unique_ptr<KvEventPublisher>(new KvEventPublisher(std::move(impl)));
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(impl_->send_mu);
    (void)impl_->in_send.send(zmq::message_t(), zmq::send_flags::none);
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

void KvEventPublisher::publish(std::string payload) {
  if (payload.empty()) return;
  std::lock_guard lock(impl_->send_mu);
  (void)impl_->in_send.send(zmq::buffer(payload), zmq::send_flags::none);
}

const std::string& KvEventPublisher::endpoint() const { return impl_->endpoint; }
const std::string& KvEventPublisher::replay_endpoint() const { return impl_->replay_endpoint; }
uint64_t KvEventPublisher::published() const {
  return impl_->published.load(std::memory_order_acquire);
}
uint64_t KvEventPublisher::dropped() const {
  return impl_->dropped.load(std::memory_order_relaxed);
}

}  // namespace kvgate::io
