#include "workload/workload.h"

#include <algorithm>
#include <cmath>

#include "core/common/rng.h"
#include "workload/arrivals.h"
#include "workload/mooncake_trace.h"
#include "workload/tenant_workload.h"

namespace kvgate::workload {
namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Content piece ids: a kind tag and up to three coordinates, mixed with the seed.
enum PieceKind : uint64_t { kSystem = 1, kQuestion, kUser, kReply, kTraceBlock, kTraceTail };

uint64_t piece_id(uint64_t seed, PieceKind kind, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix(mix(mix(mix(seed ^ (kind * 0x9e3779b97f4a7c15ULL)) ^ a) ^ b) ^ c);
}

class SharedPrefixWorkload final : public Workload {
 public:
  SharedPrefixWorkload(const WorkloadSpec& spec, uint64_t seed)
      : spec_(spec.shared_prefix),
        arrivals_(spec.arrivals, mix(seed ^ 0xa77)),
        pick_(mix(seed ^ 7)),
        length_(mix(seed ^ 0x1e9)) {
    for (uint32_t g = 0; g < spec_.groups; ++g) {
      Prompt system;
      append_content(piece_id(seed, kSystem, g), spec_.system_prompt_tokens, spec.vocab_size,
                     system);
      for (uint32_t p = 0; p < spec_.prompts_per_group; ++p) {
        auto prompt = std::make_shared<Prompt>(system);
        append_content(piece_id(seed, kQuestion, g, p), spec_.question_tokens, spec.vocab_size,
                       *prompt);
        prompts_.push_back(std::move(prompt));
      }
    }
    // inference-perf shuffles the prompts once and then cycles through them.
    Rng shuffle(mix(seed ^ 0x5f));
    for (size_t i = prompts_.size(); i > 1; --i)
      std::swap(prompts_[i - 1], prompts_[shuffle.below(i)]);
  }

  std::optional<WorkloadRequest> next() override {
    auto a = arrivals_.next();
    if (!a || prompts_.empty()) return std::nullopt;
    const size_t i = spec_.cycle ? sent_ % prompts_.size() : pick_.below(prompts_.size());
    ++sent_;
    uint32_t output = spec_.output_tokens;
    if (spec_.output_tokens_min > 0 && spec_.output_tokens_min < output) {
      output = spec_.output_tokens_min +
               static_cast<uint32_t>(length_.below(output - spec_.output_tokens_min + 1));
    }
    return WorkloadRequest{a->at, prompts_[i], output, a->stage, 0, 0, nullptr};
  }

  const std::vector<StageInfo>& stages() const override { return arrivals_.stages(); }

 private:
  SharedPrefixSpec spec_;
  ArrivalProcess arrivals_;
  Rng pick_;
  Rng length_;  // answer lengths; its own stream, so fixed-length runs are unchanged
  std::vector<PromptPtr> prompts_;
  uint64_t sent_ = 0;
};

class ChatWorkload final : public Workload {
 public:
  ChatWorkload(const WorkloadSpec& spec, uint64_t seed)
      : spec_(spec.chat),
        vocab_(spec.vocab_size),
        seed_(seed),
        arrivals_(spec.arrivals, mix(seed ^ 0xa77)),
        rng_(mix(seed ^ 0xc4a7)) {
    for (uint32_t s = 0; s < std::max<uint32_t>(spec_.system_prompts, 1); ++s) {
      auto p = std::make_shared<Prompt>();
      append_content(piece_id(seed, kSystem, s), spec_.system_prompt_tokens, vocab_, *p);
      systems_.push_back(std::move(p));
    }
  }

  std::optional<WorkloadRequest> next() override {
    auto a = arrivals_.next();
    if (!a) return std::nullopt;
    const uint64_t session = ++sessions_;
    auto prompt = std::make_shared<Prompt>(*systems_[rng_.below(systems_.size())]);
    append_content(piece_id(seed_, kUser, session, 0), spec_.user_tokens, vocab_, *prompt);
    const uint32_t span =
        spec_.max_turns >= spec_.min_turns ? spec_.max_turns - spec_.min_turns : 0;
    turns_.resize(session + 1);
    turns_[session] =
        std::max<uint32_t>(1, spec_.min_turns + static_cast<uint32_t>(rng_.below(span + 1)));
    return WorkloadRequest{a->at, std::move(prompt), spec_.output_tokens, a->stage, session,
                           0,     reply(session, 0)};
  }

  std::optional<WorkloadRequest> follow_up(const WorkloadRequest& done,
                                           Nanos finished_at) override {
    if (done.session == 0 || done.session >= turns_.size()) return std::nullopt;
    const uint32_t turn = done.turn + 1;
    if (turn >= turns_[done.session]) return std::nullopt;
    auto prompt = std::make_shared<Prompt>(*done.prompt);
    prompt->reserve(prompt->size() + done.output_tokens + spec_.user_tokens);
    if (done.reply) {
      prompt->insert(prompt->end(), done.reply->begin(), done.reply->end());
    } else {
      append_content(piece_id(seed_, kReply, done.session, done.turn), done.output_tokens, vocab_,
                     *prompt);
    }
    append_content(piece_id(seed_, kUser, done.session, turn), spec_.user_tokens, vocab_, *prompt);
    // The think time is drawn from the session's own stream so that the follow-up does not
    // depend on the order in which other sessions finished.
    Rng think(piece_id(seed_, kReply, done.session, turn, 0x7));
    const Nanos at =
        finished_at + seconds(think.exponential(1.0 / std::max(spec_.think_time_s, 1e-3)));
    return WorkloadRequest{
        at,   std::move(prompt),        spec_.output_tokens, stage_at(stages(), at), done.session,
        turn, reply(done.session, turn)};
  }

  const std::vector<StageInfo>& stages() const override { return arrivals_.stages(); }

 private:
  PromptPtr reply(uint64_t session, uint32_t turn) const {
    auto r = std::make_shared<Prompt>();
    append_content(piece_id(seed_, kReply, session, turn), spec_.output_tokens, vocab_, *r);
    return r;
  }

  ChatSpec spec_;
  uint32_t vocab_;
  uint64_t seed_;
  ArrivalProcess arrivals_;
  Rng rng_;
  std::vector<PromptPtr> systems_;
  std::vector<uint32_t> turns_;  // per session id
  uint64_t sessions_ = 0;
};

class TraceWorkload final : public Workload {
 public:
  TraceWorkload(const WorkloadSpec& spec, uint64_t seed, std::vector<TraceRecord> records)
      : spec_(spec.trace), vocab_(spec.vocab_size), seed_(seed), records_(std::move(records)) {
    const double width = spec_.stage_s > 0 ? spec_.stage_s : 60;
    const double last = records_.empty() ? 0
                                         : static_cast<double>(records_.back().timestamp_ms) / 1e3 *
                                               spec_.time_scale;
    std::vector<uint64_t> counts;
    for (const TraceRecord& r : records_) {
      const double t = static_cast<double>(r.timestamp_ms) / 1e3 * spec_.time_scale;
      const size_t b = static_cast<size_t>(std::max(0.0, t) / width);
      if (counts.size() <= b) counts.resize(b + 1);
      ++counts[b];
    }
    for (size_t b = 0; b < counts.size(); ++b) {
      const double s = b * width;
      const double e = std::min(s + width, std::max(last, s + 1e-3));
      stages_.push_back(
          {counts[b] / width, seconds(s), seconds(b + 1 == counts.size() ? e : s + width), false});
    }
  }

  std::optional<WorkloadRequest> next() override {
    if (next_ >= records_.size()) return std::nullopt;
    const TraceRecord& r = records_[next_++];
    auto prompt = std::make_shared<Prompt>();
    prompt->reserve(r.input_length);
    for (size_t i = 0; i < r.hash_ids.size() && prompt->size() < r.input_length; ++i) {
      const size_t n = std::min<size_t>(spec_.block_tokens, r.input_length - prompt->size());
      // A block's content depends only on its hash id (and the seed), as in the trace.
      append_content(piece_id(seed_, kTraceBlock, r.hash_ids[i]), n, vocab_, *prompt);
    }
    if (prompt->size() < r.input_length) {
      append_content(piece_id(seed_, kTraceTail, next_), r.input_length - prompt->size(), vocab_,
                     *prompt);
    }
    const Nanos at = seconds(static_cast<double>(r.timestamp_ms) / 1e3 * spec_.time_scale);
    return WorkloadRequest{at,
                           std::move(prompt),
                           std::max<uint32_t>(r.output_length, 1),
                           stage_at(stages_, at),
                           0,
                           0,
                           nullptr};
  }

  const std::vector<StageInfo>& stages() const override { return stages_; }

 private:
  TraceSpec spec_;
  uint32_t vocab_;
  uint64_t seed_;
  std::vector<TraceRecord> records_;
  std::vector<StageInfo> stages_;
  size_t next_ = 0;
};

}  // namespace

void append_content(uint64_t piece, size_t n, uint32_t vocab_size, Prompt& out) {
  const uint64_t vocab = std::max<uint32_t>(vocab_size, 2);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = mix(piece + 0x9e3779b97f4a7c15ULL * (i + 1));
    out.push_back(static_cast<TokenId>((static_cast<__uint128_t>(h) * vocab) >> 64));
  }
}

namespace {

// A workload whose requests carry latency targets with probability targets.fraction,
// drawn from a hash of the seed and the request's ordinal (the inner workload's own
// draws are untouched: the same requests come, some with targets).
class TargetedWorkload final : public Workload {
 public:
  TargetedWorkload(std::unique_ptr<Workload> inner, TargetsSpec targets, uint64_t seed)
      : inner_(std::move(inner)), targets_(targets), seed_(mix(seed ^ 0x746172676574ULL)) {}

  std::optional<WorkloadRequest> next() override { return mark(inner_->next()); }
  std::optional<WorkloadRequest> follow_up(const WorkloadRequest& finished,
                                           Nanos finished_at) override {
    return mark(inner_->follow_up(finished, finished_at));
  }
  const std::vector<StageInfo>& stages() const override { return inner_->stages(); }

 private:
  std::optional<WorkloadRequest> mark(std::optional<WorkloadRequest> r) {
    if (!r) return r;
    r->ttft_target = 0;  // a follow-up is a copy of the finished request
    r->tpot_target = 0;
    const uint64_t h = mix(seed_ + 0x9e3779b97f4a7c15ULL * ++count_);
    if (static_cast<double>(h >> 11) * 0x1p-53 < targets_.fraction) {
      r->ttft_target = targets_.ttft;
      r->tpot_target = targets_.tpot;
    }
    return r;
  }

  std::unique_ptr<Workload> inner_;
  const TargetsSpec targets_;
  const uint64_t seed_;
  uint64_t count_ = 0;
};

Result<std::unique_ptr<Workload>> make_untargeted(const WorkloadSpec& spec, uint64_t seed,
                                                  const ReadFile& read_file);

}  // namespace

bool WorkloadSpec::any_targets() const {
  if (targets.any()) return true;
  for (const WorkloadSpec& w : tenant_workloads) {
    if (w.any_targets()) return true;
  }
  return false;
}

Result<std::unique_ptr<Workload>> make_workload(const WorkloadSpec& spec, uint64_t seed,
                                                const ReadFile& read_file) {
  auto w = make_untargeted(spec, seed, read_file);
  if (!w || !spec.targets.any()) return w;
  return std::unique_ptr<Workload>(new TargetedWorkload(std::move(*w), spec.targets, seed));
}

namespace {

Result<std::unique_ptr<Workload>> make_untargeted(const WorkloadSpec& spec, uint64_t seed,
                                                  const ReadFile& read_file) {
  switch (spec.kind) {
    case WorkloadSpec::Kind::kSharedPrefix:
      if (spec.shared_prefix.groups == 0 || spec.shared_prefix.prompts_per_group == 0) {
        return Error("shared_prefix: groups and prompts_per_group must be > 0");
      }
      return std::unique_ptr<Workload>(new SharedPrefixWorkload(spec, seed));
    case WorkloadSpec::Kind::kChat:
      return std::unique_ptr<Workload>(new ChatWorkload(spec, seed));
    case WorkloadSpec::Kind::kTrace: {
      if (spec.trace.block_tokens == 0) return Error("trace: block_tokens must be > 0");
      Result<std::string> text = read_file(spec.trace.path);
      if (!text) return Error("cannot open trace " + spec.trace.path);
      auto records = parse_trace(*text, spec.trace.path, spec.trace.max_requests);
      if (!records) return Error(records.error());
      return std::unique_ptr<Workload>(new TraceWorkload(spec, seed, std::move(*records)));
    }
    case WorkloadSpec::Kind::kTenants:
      return make_tenant_workload(spec, seed, read_file);
  }
  return Error("unknown workload kind");
}

}  // namespace

}  // namespace kvgate::workload
