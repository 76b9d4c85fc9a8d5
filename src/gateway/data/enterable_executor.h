// EnterableExecutor: the executor under a pool's strand (pool_routing.h) that lets a
// thread which is none of the gateway's I/O threads run the strand's work itself when the
// strand is free, instead of waking an I/O thread for it and being woken back: the
// Endpoint Picker's gRPC threads deciding a pick inline (DataPlane::pick_external,
// gateway/data/external.cc).
//
//   auto strand = asio::make_strand(EnterableExecutor(io.get_executor()));
//   {
//     EnterStrandsHere here;                 // this thread may run free strands' work
//     asio::dispatch(strand, [] { ... });    // runs here if the strand is free, else
//   }                                        // queued on it (an I/O thread runs it)
//
// Why it is safe: the strand's own exclusion is untouched. asio::strand serializes its
// work with its own lock (strand_executor_service::enqueue): the one caller that finds the
// strand free takes it and must schedule it through the inner executor (this one); every
// other caller's work waits in the strand's queue. All this executor changes is where that
// schedule runs: on the calling thread at once, when the thread is inside an
// EnterStrandsHere and the schedule may block (a dispatch, not a post); otherwise it is the
// io_context's executor unchanged (posted to the context, or inline on one of its threads
// for a dispatch, as before). So a strand's handlers still run one at a time, each after
// the previous one with the happens-before the strand's mutex gives, whichever thread runs
// them. While they run on the entering thread the strand is running in that thread
// (strand::running_in_this_thread), so what they dispatch onto it runs inline there, as on
// an I/O thread. Work that others queued meanwhile is scheduled with blocking.never when
// the strand's turn ends (strand_executor_service's invoker), that is posted to the
// io_context: the entering thread runs only the work it brought, and what that work
// dispatches onto strands that are free.
//
// Without an EnterStrandsHere in scope (every I/O thread, every other thread) nothing
// differs from a strand made directly on the io_context's executor. Every property
// (context, blocking, outstanding work, allocator, ...) is the inner executor's, forwarded.
#pragma once

#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/require.hpp>
#include <type_traits>
#include <utility>

namespace kvgate::gateway {

namespace enterable_detail {
// > 0 while an EnterStrandsHere is in scope on this thread.
inline thread_local int enter_depth = 0;
}  // namespace enterable_detail

// This thread may run the work of free strands made on an EnterableExecutor itself, while
// in scope. For a thread that is none of the context's: an I/O thread gains nothing.
class EnterStrandsHere {
 public:
  EnterStrandsHere() noexcept { ++enterable_detail::enter_depth; }
  ~EnterStrandsHere() { --enterable_detail::enter_depth; }
  EnterStrandsHere(const EnterStrandsHere&) = delete;
  EnterStrandsHere& operator=(const EnterStrandsHere&) = delete;
};

template <class Inner>
class EnterableExecutor {
 public:
  explicit EnterableExecutor(const Inner& inner) noexcept : inner_(inner) {}

  // The inner executor's properties, as they are.
  template <class Property>
  auto query(const Property& p) const
      noexcept(noexcept(boost::asio::query(std::declval<const Inner&>(), p)))
          -> decltype(boost::asio::query(std::declval<const Inner&>(), p)) {
    return boost::asio::query(inner_, p);
  }
  template <class Property>
  auto require(const Property& p) const -> EnterableExecutor<
      std::decay_t<decltype(boost::asio::require(std::declval<const Inner&>(), p))>> {
    using Required = std::decay_t<decltype(boost::asio::require(inner_, p))>;
    return EnterableExecutor<Required>(boost::asio::require(inner_, p));
  }
  template <class Property>
  auto prefer(const Property& p) const -> EnterableExecutor<
      std::decay_t<decltype(boost::asio::prefer(std::declval<const Inner&>(), p))>> {
    using Preferred = std::decay_t<decltype(boost::asio::prefer(inner_, p))>;
    return EnterableExecutor<Preferred>(boost::asio::prefer(inner_, p));
  }

  // Runs `f` here when this thread entered (EnterStrandsHere) and `f` may run before this
  // returns (not blocking.never); else the inner executor's execute.
  template <class Function>
  void execute(Function&& f) const {
    if (enterable_detail::enter_depth > 0 &&
        boost::asio::query(inner_, boost::asio::execution::blocking) !=
            boost::asio::execution::blocking.never) {
      std::decay_t<Function> run(std::forward<Function>(f));
      run();
      return;
    }
    inner_.execute(std::forward<Function>(f));
  }

  friend bool operator==(const EnterableExecutor& a, const EnterableExecutor& b) noexcept {
    return a.inner_ == b.inner_;
  }
  friend bool operator!=(const EnterableExecutor& a, const EnterableExecutor& b) noexcept {
    return !(a.inner_ == b.inner_);
  }

 private:
  Inner inner_;
};

}  // namespace kvgate::gateway
