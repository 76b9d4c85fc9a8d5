// The calls on the Endpoint Picker's completion queues (epp_server.cc): every service of
// the EPP (ext_proc, health) is on gRPC's async API, and each queue's thread runs what
// its queue hands back, whichever service it is of. A call is an object of ours (an
// ext_proc stream, a health Check or Watch) whose operations each carry a tag; the queue's
// loop hands each completed tag to QueueTag::fire, on the queue's thread:
//
//   void* tag; bool ok;
//   while (cq->Next(&tag, &ok)) static_cast<const QueueTag*>(tag)->fire(ok);
//
// Each operation is given its tag as `tag_.tag()` (a QueueTag*, which the loop casts back).
//
// Lifetime: a call (QueueCall) counts its operations out; CallTag's fire runs the
// operation's reaction, then deletes the call when none is left, on the queue's thread.
// QueueCalls counts the calls of a server's queues, so that the server's end shuts its
// queues down only once every call is gone (gRPC aborts on an operation started on a
// queue that is shut down).
//
// No gRPC in here: the types only carry pointers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace kvgate::epp {

// A tag on one of the EPP's completion queues: what its thread runs when the operation
// completes (`ok` as Next() says). Every tag on those queues is one.
class QueueTag {
 public:
  virtual void fire(bool ok) const = 0;

 protected:
  QueueTag() = default;
  ~QueueTag() = default;
  QueueTag(const QueueTag&) = default;
  QueueTag& operator=(const QueueTag&) = default;
};

// The calls of one server's queues: how many exist (accepted, or waiting for a call), and
// whether new ones may wait for calls. Thread-safe.
class QueueCalls {
 public:
  // A new call may wait for a call: true, and counted, unless stop_admitting() was called.
  bool admit() {
    std::lock_guard lock(mu_);
    if (!admitting_) return false;
    ++live_;
    return true;
  }
  // A call was deleted.
  void ended() {
    std::lock_guard lock(mu_);
    if (--live_ == 0) none_.notify_all();
  }
  // No new call from now on (the server's end).
  void stop_admitting() {
    std::lock_guard lock(mu_);
    admitting_ = false;
  }
  // Returns when no call is left: after stop_admitting() and the server's Shutdown, which
  // fails the calls waited for, none comes back.
  void wait_none() {
    std::unique_lock lock(mu_);
    none_.wait(lock, [this] { return live_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable none_;
  size_t live_ = 0;        // under mu_
  bool admitting_ = true;  // under mu_
};

template <class Call>
class CallTag;

// The base of a call on an EPP queue (`class Stream final : public QueueCall`): it counts
// the call's operations out (op_started() before each is started, on the queue's thread;
// its CallTag's fire ends it) and is deleted by that fire when none is out. Made with
// `new` after QueueCalls::admit(); QueueCalls::ended() follows its deletion.
class QueueCall {
 public:
  QueueCall(const QueueCall&) = delete;
  QueueCall& operator=(const QueueCall&) = delete;

 protected:
  explicit QueueCall(QueueCalls& calls) : calls_(calls) {}
  ~QueueCall() = default;

  // An operation out: its tag's fire ends it.
  void op_started() { ++pending_; }
  // An operation counted by op_started() ended without its tag (a pick decided inline):
  // from a reaction only, whose fire then deletes the call if nothing else is out.
  void op_ended() { --pending_; }
  QueueCalls& calls() const { return calls_; }

 private:
  template <class Call>
  friend class CallTag;

  QueueCalls& calls_;
  int pending_ = 0;  // the queue's thread only
};

// The tag of one operation of `Call` (final, derived from QueueCall): its reaction is the
// member function `on`.
template <class Call>
class CallTag final : public QueueTag {
 public:
  using On = void (Call::*)(bool ok);
  CallTag(Call* call, On on) : call_(call), on_(on) {}

  // What gRPC is given as the operation's tag: the queue's loop reads it as a QueueTag.
  void* tag() { return static_cast<QueueTag*>(this); }

  void fire(bool ok) const override {
    Call* const call = call_;  // the tag is a member of the call: gone with it
    QueueCall& base = *call;
    --base.pending_;
    (call->*on_)(ok);
    if (base.pending_ > 0) return;
    QueueCalls& calls = base.calls_;
    delete call;
    calls.ended();
  }

 private:
  Call* call_;
  On on_;
};

}  // namespace kvgate::epp
