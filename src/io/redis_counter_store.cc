#include "io/redis_counter_store.h"

#include <hiredis.h>

#include <algorithm>
#include <string_view>

namespace kvgate::io {
namespace {

// Increments KEYS[i] by ARGV[i] and sets its expiry to ARGV[#KEYS + i] ms, atomically.
constexpr std::string_view kAddScript =
    "for i = 1, #KEYS do "
    "redis.call('INCRBY', KEYS[i], ARGV[i]) "
    "redis.call('PEXPIRE', KEYS[i], ARGV[#KEYS + i]) "
    "end return #KEYS";

std::string reply_error(const redisReply* r, std::string_view error, std::string_view what) {
  std::string out = "redis ";
  out += what;
  out += ": ";
  if (r == nullptr) {
    out += error;
  } else if (r->type == REDIS_REPLY_ERROR) {
    out.append(r->str, r->len);
  } else {
    out += "unexpected reply";
  }
  return out;
}

}  // namespace

RedisCounterStore::RedisCounterStore(boost::asio::any_io_executor executor, Options options)
    : redis_(std::move(executor), std::move(options)) {}

RedisCounterStore::~RedisCounterStore() { closing_ = true; }

void RedisCounterStore::get(std::span<const std::string> keys, GetDone done) {
  if (keys.empty()) {
    done(std::vector<int64_t>{});
    return;
  }
  std::vector<std::string_view> args;
  args.reserve(keys.size() + 1);
  args.push_back("MGET");
  for (const std::string& k : keys) args.push_back(k);
  redis_.command(
      args, [n = keys.size(), done = std::move(done)](const redisReply* r, std::string_view error) {
        if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != n) {
          done(Error(reply_error(r, error, "MGET")));
          return;
        }
        std::vector<int64_t> values;
        values.reserve(n);
        for (size_t i = 0; i < r->elements; ++i) {
          const redisReply* e = r->element[i];
          values.push_back(e->type == REDIS_REPLY_STRING ? std::strtoll(e->str, nullptr, 10) : 0);
        }
        done(std::move(values));
      });
}

void RedisCounterStore::add(std::span<const limit::Increment> increments, AddDone done) {
  if (increments.empty()) {
    if (done) done(Status{});
    return;
  }
  for (const limit::Increment& inc : increments) {
    auto [it, fresh] = queued_.try_emplace(inc.key, inc);
    if (!fresh) {
      it->second.amount += inc.amount;
      it->second.ttl = std::max(it->second.ttl, inc.ttl);
    }
  }
  if (done) queued_done_.push_back(std::move(done));
  if (!add_in_flight_) send_adds();
}

void RedisCounterStore::send_adds() {
  if (queued_.empty()) return;
  std::vector<std::string> args{"EVAL", std::string(kAddScript), std::to_string(queued_.size())};
  args.reserve(3 + 3 * queued_.size());
  for (const auto& [key, inc] : queued_) args.push_back(key);
  for (const auto& [key, inc] : queued_) args.push_back(std::to_string(inc.amount));
  for (const auto& [key, inc] : queued_) {
    args.push_back(std::to_string(std::max<Nanos>(1, inc.ttl / kMillisecond)));
  }
  queued_.clear();
  add_in_flight_ = true;
  redis_.command(
      args, [this, done = std::move(queued_done_)](const redisReply* r, std::string_view error) {
        add_in_flight_ = false;
        Status s;
        if (r == nullptr || r->type == REDIS_REPLY_ERROR) s = Error(reply_error(r, error, "EVAL"));
        for (const AddDone& d : done) d(s);
        if (!closing_) send_adds();
      });
  queued_done_.clear();
}

}  // namespace kvgate::io
