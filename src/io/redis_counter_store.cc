#include "io/redis_counter_store.h"

#include <hiredis.h>

#include <string_view>

namespace kvgate::io {
namespace {

timeval ToTimeval(Nanos t) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(t / kSecond);
  tv.tv_usec = static_cast<suseconds_t>((t % kSecond) / 1000);
  return tv;
}

// Increments KEYS[i] by ARGV[i] and sets its expiry to ARGV[#KEYS + i] ms, atomically.
constexpr std::string_view kAddScript =
    "for i = 1, #KEYS do "
    "redis.call('INCRBY', KEYS[i], ARGV[i]) "
    "redis.call('PEXPIRE', KEYS[i], ARGV[#KEYS + i]) "
    "end return #KEYS";

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

}  // namespace

RedisCounterStore::RedisCounterStore(Options options) : options_(std::move(options)) {}

RedisCounterStore::~RedisCounterStore() { drop_connection(); }

void RedisCounterStore::drop_connection() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

Status RedisCounterStore::ensure_connected(Nanos now) {
  if (ctx_ != nullptr) return {};
  if (now < next_attempt_) return Error("redis unavailable: " + last_error_);
  next_attempt_ = now + options_.reconnect_interval;
  timeval tv = ToTimeval(options_.connect_timeout);
  redisContext* c = redisConnectWithTimeout(options_.host.c_str(), options_.port, tv);
  if (c == nullptr || c->err) {
    last_error_ = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    return Error("redis connect " + options_.host + ":" + std::to_string(options_.port) + ": " +
                 last_error_);
  }
  timeval cmd = ToTimeval(options_.command_timeout);
  redisSetTimeout(c, cmd);
  ctx_ = c;
  if (!options_.password.empty()) {
    Reply r(static_cast<redisReply*>(redisCommand(ctx_, "AUTH %s", options_.password.c_str())));
    if (!r || r->type == REDIS_REPLY_ERROR) {
      last_error_ = r ? std::string(r->str, r->len) : ctx_->errstr;
      drop_connection();
      return Error("redis auth: " + last_error_);
    }
  }
  return {};
}

Result<std::vector<int64_t>> RedisCounterStore::get(std::span<const std::string> keys, Nanos now) {
  std::lock_guard lock(mu_);
  if (keys.empty()) return std::vector<int64_t>{};
  if (Status s = ensure_connected(now); !s) return Error(s.error());
  std::vector<const char*> argv{"MGET"};
  std::vector<size_t> lens{4};
  for (const std::string& k : keys) {
    argv.push_back(k.data());
    lens.push_back(k.size());
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != keys.size()) {
    last_error_ = r ? (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len)
                                                    : std::string("unexpected MGET reply"))
                    : std::string(ctx_->errstr);
    drop_connection();
    return Error("redis MGET: " + last_error_);
  }
  std::vector<int64_t> values;
  values.reserve(keys.size());
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    values.push_back(e->type == REDIS_REPLY_STRING ? std::strtoll(e->str, nullptr, 10) : 0);
  }
  return values;
}

Status RedisCounterStore::add(std::span<const limit::Increment> increments, Nanos now) {
  std::lock_guard lock(mu_);
  if (increments.empty()) return {};
  if (Status s = ensure_connected(now); !s) return s;
  std::vector<std::string> args{"EVAL", std::string(kAddScript), std::to_string(increments.size())};
  for (const auto& inc : increments) args.push_back(inc.key);
  for (const auto& inc : increments) args.push_back(std::to_string(inc.amount));
  for (const auto& inc : increments) {
    args.push_back(std::to_string(std::max<Nanos>(1, inc.ttl / kMillisecond)));
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (!r || r->type == REDIS_REPLY_ERROR) {
    last_error_ = r ? std::string(r->str, r->len) : std::string(ctx_->errstr);
    drop_connection();
    return Error("redis EVAL: " + last_error_);
  }
  return {};
}

}  // namespace kvgate::io
