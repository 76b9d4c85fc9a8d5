#include "io/kv_event_subscriber.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "env/system_clock.h"

namespace kvgate::io {
namespace {

constexpr uint64_t kEndSeq = ~uint64_t{0};

uint64_t read_seq(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8 && i < m.size(); ++i) v = (v << 8) | p[i];
  return v;
}

std::string seq_bytes(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(v & 0xFF);
  return s;
}

struct SourceState {
  KvEventSource source;
  std::unique_ptr<zmq::socket_t> sub;     // connect mode
  std::unique_ptr<zmq::socket_t> dealer;  // while a replay runs
  kv::EventSequencer seq;
  kv::SequenceStats stats;
  bool replaying = false;
  Nanos replay_deadline = 0;
  std::map<uint64_t, std::string> held;  // live payloads held back during a replay
};

}  // namespace

struct KvEventSubscriber::Impl {
  Options options;
  Sink sink;
  zmq::context_t ctx{1};
  std::unique_ptr<zmq::socket_t> bound;  // bind mode
  std::string bound_endpoint;            // constant after create()
  std::unordered_map<kv::EndpointId, std::unique_ptr<SourceState>> sources;
  std::unordered_map<std::string, kv::EndpointId> by_topic;  // bind mode
  std::map<kv::EndpointId, KvEventDelivery> pending;         // this poll round's output
  // Dealers of finished replays, closed at the end of the poll round (a replay may end
  // while its socket is being drained).
  std::vector<std::unique_ptr<zmq::socket_t>> retired;

  mutable std::mutex mu;
  // State below is protected by mu.
  std::vector<KvEventSource> to_add;
  std::vector<kv::EndpointId> to_remove;
  std::unordered_map<kv::EndpointId, kv::SequenceStats> stats_snapshot;

  std::atomic<bool> stop{false};
  std::thread thread;

  // --- output ---

  KvEventDelivery& out(kv::EndpointId e, bool clear_first) {
    auto it = pending.find(e);
    if (it != pending.end() && clear_first) {  // what came before the clear goes first
      sink(std::move(it->second));
      pending.erase(it);
      it = pending.end();
    }
    if (it == pending.end()) {
      it = pending.emplace(e, KvEventDelivery{e, clear_first, {}}).first;
    }
    return it->second;
  }

  void flush() {
    for (auto& [e, d] : pending) sink(std::move(d));
    pending.clear();
  }

  // Decodes and queues batch `seq` of `st` (already classified as applicable).
  void deliver(SourceState& st, uint64_t seq, std::string_view payload, bool clear_first) {
    st.seq.accept(seq);
    Result<kv::EventBatch> batch = kv::decode_event_batch(payload);
    if (!batch) {
      // A batch we cannot read is a batch lost: start over from a clean slate.
      ++st.stats.decode_errors;
      out(st.source.endpoint, true);
      return;
    }
    ++st.stats.batches;
    out(st.source.endpoint, clear_first).batches.push_back(std::move(*batch));
  }

  // --- the live stream ---

  void on_live(SourceState& st, uint64_t seq, std::string_view payload) {
    if (st.replaying) {
      if (st.held.size() >= options.max_held_batches) {
        abandon_replay(st);
      } else {
        st.held.emplace(seq, std::string(payload));
        return;
      }
    }
    handle(st, seq, payload, /*may_replay=*/true);
  }

  void handle(SourceState& st, uint64_t seq, std::string_view payload, bool may_replay) {
    switch (st.seq.classify(seq)) {
      case kv::SeqAction::kApply:
        deliver(st, seq, payload, false);
        return;
      case kv::SeqAction::kDuplicate:
        ++st.stats.duplicates;
        return;
      case kv::SeqAction::kRestart:
        ++st.stats.restarts;
        deliver(st, seq, payload, true);
        return;
      case kv::SeqAction::kGap: {
        ++st.stats.gaps;
        const uint64_t expected = *st.seq.expected();
        if (may_replay && !st.source.replay.empty() && start_replay(st, expected)) {
          st.held.emplace(seq, std::string(payload));
          return;
        }
        st.stats.missed += seq - expected;
        deliver(st, seq, payload, true);
        return;
      }
    }
  }

  // --- replay ---

  bool start_replay(SourceState& st, uint64_t from) {
    try {
      auto d = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
      d->set(zmq::sockopt::linger, 0);
      d->connect(st.source.replay);
      std::string start = seq_bytes(from);
      d->send(zmq::message_t(), zmq::send_flags::sndmore);
      d->send(zmq::buffer(start), zmq::send_flags::none);
      st.dealer = std::move(d);
    } catch (const zmq::error_t&) {
      return false;
    }
    ++st.stats.replays;
    st.replaying = true;
    st.replay_deadline = options.clock->now() + options.replay_timeout;
    return true;
  }

  void on_replay(SourceState& st, std::vector<zmq::message_t>& frames) {
    // ["", seq, payload]; the end marker has seq 0xFF..FF and an empty payload.
    if (frames.size() < 3) return;
    uint64_t seq = read_seq(frames[1]);
    if (seq == kEndSeq) {
      finish_replay(st);
      return;
    }
    const kv::SeqAction a = st.seq.classify(seq);
    std::string_view payload(static_cast<const char*>(frames[2].data()), frames[2].size());
    if (a == kv::SeqAction::kApply) {
      ++st.stats.replayed;
      deliver(st, seq, payload, false);
    } else if (a == kv::SeqAction::kGap) {
      // The engine's buffer no longer reaches back far enough.
      st.stats.missed += seq - *st.seq.expected();
      deliver(st, seq, payload, true);
    } else if (a == kv::SeqAction::kDuplicate) {
      ++st.stats.duplicates;
    }
  }

  void finish_replay(SourceState& st) {
    st.replaying = false;
    retired.push_back(std::move(st.dealer));
    auto held = std::move(st.held);
    st.held.clear();
    for (auto& [seq, payload] : held) handle(st, seq, payload, /*may_replay=*/false);
  }

  void abandon_replay(SourceState& st) {
    // Clear and go on from the batches held back (the missing ones are lost).
    st.replaying = false;
    retired.push_back(std::move(st.dealer));
    auto held = std::move(st.held);
    st.held.clear();
    if (held.empty()) {
      st.seq.reset();
      out(st.source.endpoint, true);
      return;
    }
    st.stats.missed += held.begin()->first - st.seq.expected().value_or(held.begin()->first);
    bool first = true;
    for (auto& [seq, payload] : held) {
      if (first) {
        deliver(st, seq, payload, true);
        first = false;
      } else {
        handle(st, seq, payload, /*may_replay=*/false);
      }
    }
  }

  // --- the thread ---

  void apply_control() {
    std::vector<KvEventSource> add;
    std::vector<kv::EndpointId> remove;
    {
      std::lock_guard lock(mu);
      add.swap(to_add);
      remove.swap(to_remove);
    }
    for (kv::EndpointId e : remove) {
      auto it = sources.find(e);
      if (it == sources.end()) continue;
      if (bound) by_topic.erase(it->second->source.topic);
      sources.erase(it);
      std::lock_guard lock(mu);
      stats_snapshot.erase(e);
    }
    for (KvEventSource& s : add) {
      auto st = std::make_unique<SourceState>();
      st->source = std::move(s);
      if (bound) {
        by_topic[st->source.topic] = st->source.endpoint;
      } else {
        try {
          st->sub = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::sub);
          st->sub->set(zmq::sockopt::linger, 0);
          st->sub->set(zmq::sockopt::rcvhwm, 100'000);
          st->sub->set(zmq::sockopt::subscribe, st->source.topic);
          st->sub->connect(st->source.publisher);
        } catch (const zmq::error_t&) {
          ++st->stats.decode_errors;  // unusable address: visible as an anomaly
          st->sub.reset();
        }
      }
      sources[st->source.endpoint] = std::move(st);
    }
  }

  template <typename Fn>
  void drain(zmq::socket_t& sock, Fn&& fn) {
    for (int i = 0; i < 1024; ++i) {  // bounded: other sockets get their turn
      std::vector<zmq::message_t> frames;
      auto n = zmq::recv_multipart(sock, std::back_inserter(frames), zmq::recv_flags::dontwait);
      if (!n) return;
      fn(frames);
    }
  }

  void on_pub_frames(SourceState* known, std::vector<zmq::message_t>& frames) {
    if (frames.size() < 3) return;  // [topic, seq, payload]
    SourceState* st = known;
    if (st == nullptr) {
      auto t = by_topic.find(frames[0].to_string());
      if (t == by_topic.end()) return;
      auto s = sources.find(t->second);
      if (s == sources.end()) return;
      st = s->second.get();
    }
    on_live(*st, read_seq(frames[1]),
            std::string_view(static_cast<const char*>(frames[2].data()), frames[2].size()));
  }

  void run() {
    while (!stop.load()) {
      apply_control();
      std::vector<zmq::pollitem_t> items;
      std::vector<std::pair<SourceState*, bool>> owners;  // (source, is_dealer)
      if (bound) {
        items.push_back({bound->handle(), 0, ZMQ_POLLIN, 0});
        owners.push_back({nullptr, false});
      }
      for (auto& [e, st] : sources) {
        if (st->sub) {
          items.push_back({st->sub->handle(), 0, ZMQ_POLLIN, 0});
          owners.push_back({st.get(), false});
        }
        if (st->dealer) {
          items.push_back({st->dealer->handle(), 0, ZMQ_POLLIN, 0});
          owners.push_back({st.get(), true});
        }
      }
      const auto timeout = std::chrono::milliseconds(options.poll_interval / kMillisecond);
      try {
        if (items.empty()) {
          std::this_thread::sleep_for(timeout);
        } else {
          zmq::poll(items, timeout);
        }
      } catch (const zmq::error_t&) {
        continue;  // EINTR
      }
      for (size_t i = 0; i < items.size(); ++i) {
        if (!(items[i].revents & ZMQ_POLLIN)) continue;
        auto [st, is_dealer] = owners[i];
        if (is_dealer) {
          if (st->dealer) drain(*st->dealer, [&](auto& f) { on_replay(*st, f); });
        } else if (st == nullptr) {
          drain(*bound, [&](auto& f) { on_pub_frames(nullptr, f); });
        } else if (st->sub) {
          drain(*st->sub, [&](auto& f) { on_pub_frames(st, f); });
        }
      }
      const Nanos now = options.clock->now();
      for (auto& [e, st] : sources) {
        if (st->replaying && now > st->replay_deadline) abandon_replay(*st);
      }
      retired.clear();
      flush();
      std::lock_guard lock(mu);
      for (auto& [e, st] : sources) {
        stats_snapshot[e] = st->stats;
        stats_snapshot[e].next_sequence = st->seq.expected().value_or(0);
      }
    }
  }
};

Result<std::unique_ptr<KvEventSubscriber>> KvEventSubscriber::create(Options options, Sink sink) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (impl->options.clock == nullptr) impl->options.clock = &env::system_clock();
  impl->sink = std::move(sink);
  if (!impl->options.bind_url.empty()) {
    try {
      impl->bound = std::make_unique<zmq::socket_t>(impl->ctx, zmq::socket_type::sub);
      impl->bound->set(zmq::sockopt::linger, 0);
      impl->bound->set(zmq::sockopt::rcvhwm, 100'000);
      impl->bound->set(zmq::sockopt::subscribe, "");
      impl->bound->bind(impl->options.bind_url);
      impl->bound_endpoint = impl->bound->get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      return Error("kv events: cannot bind " + impl->options.bind_url + ": " + e.what());
    }
  }
  Impl* raw = impl.get();
  std::unique_ptr<KvEventSubscriber> sub(new KvEventSubscriber(std::move(impl)));
  raw->thread = std::thread([raw] { raw->run(); });
  return sub;
}

KvEventSubscriber::KvEventSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvEventSubscriber::~KvEventSubscriber() {
  impl_->stop.store(true);
  if (impl_->thread.joinable()) impl_->thread.join();
}

void KvEventSubscriber::add_source(KvEventSource source) {
  std::lock_guard lock(impl_->mu);
  impl_->to_add.push_back(std::move(source));
}

void KvEventSubscriber::remove_source(kv::EndpointId endpoint) {
  std::lock_guard lock(impl_->mu);
  impl_->to_remove.push_back(endpoint);
}

std::string KvEventSubscriber::bound_endpoint() const { return impl_->bound_endpoint; }

kv::SequenceStats KvEventSubscriber::stats(kv::EndpointId endpoint) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->stats_snapshot.find(endpoint);
  return it == impl_->stats_snapshot.end() ? kv::SequenceStats{} : it->second;
}

}  // namespace kvgate::io
