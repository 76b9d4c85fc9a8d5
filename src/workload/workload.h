// Workload: the stream of requests a simulation (or a load generator) sends.
//
// A workload is described in YAML (workload_yaml.h) and built here into a generator that
// yields requests in arrival order, each with real token ids: prompts that are meant to
// share a prefix share equal token ids, so block keys collide exactly where intended and
// nowhere else. Kinds:
//   - shared_prefix: llm-d's / inference-perf's benchmark: `groups` system prompts, each
//     with `prompts_per_group` questions; the groups x prompts distinct prompts are
//     shuffled once and sent in a cycle (inference-perf's order) or drawn at random;
//     answers of one length, or of lengths drawn in a range.
//   - chat: multi-turn sessions; each turn's prompt is the previous prompt plus the
//     assistant's reply plus a new user message, sent a think time after the previous
//     turn finished (closed loop, so follow_up() produces it).
//   - trace: Mooncake trace replay (JSON lines with timestamp ms, input_length,
//     output_length, hash_ids; each hash id is one 512-token block of content).
// Arrivals (shared_prefix, chat): Poisson or constant-rate stages stepping up in QPS, or
// a diurnal curve (a sinusoidal rate, sampled by thinning), cut into report stages.
//
// The same spec and seed give the same requests, token for token, on every machine.
// Pure: the one file a workload reads (a trace) comes through the caller's ReadFile, so
// the simulator and the load generator, which pass env::read_file, and tests, which pass
// text of their own, run the same generator.
//
//   auto w = make_workload(spec, /*seed=*/1, env::read_file);
//   while (auto r = (*w)->next()) simulate(*r);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.h"
#include "core/common/time.h"
#include "core/kv/block_hash.h"
#include "core/route/request.h"

namespace kvgate::workload {

using kv::TokenId;
using Prompt = std::vector<TokenId>;
using PromptPtr = std::shared_ptr<const Prompt>;

// One step of an arrival ladder.
struct Stage {
  double qps = 1;
  double duration_s = 10;
  bool warmup = false;  // sent, but left out of the summary figures
};

struct ArrivalSpec {
  enum class Kind { kPoisson, kConstant, kDiurnal };
  Kind kind = Kind::kPoisson;
  std::vector<Stage> stages;  // kPoisson, kConstant
  // kDiurnal: rate(t) = mean_qps * (1 + amplitude * sin(2 pi t / period_s + phase)) on
  // [0, duration_s), reported in stages of stage_s seconds.
  double mean_qps = 1;
  double amplitude = 0.5;  // 0..1
  double period_s = 86400;
  double phase = 0;
  double duration_s = 86400;
  double stage_s = 3600;
  // kDiurnal: bursts multiply the curve's rate by `factor` on [start_s, start_s + duration_s).
  struct Burst {
    double start_s = 0;
    double duration_s = 0;
    double factor = 1;
  };
  std::vector<Burst> bursts;
};

// The diurnal curve's rate (requests/s) at `t_s` seconds, bursts included.
double diurnal_rate(const ArrivalSpec& spec, double t_s);

struct SharedPrefixSpec {
  uint32_t groups = 150;
  uint32_t prompts_per_group = 5;
  uint32_t system_prompt_tokens = 6000;
  uint32_t question_tokens = 1200;
  uint32_t output_tokens = 1000;
  // > 0: each request's answer length is drawn uniformly in [output_tokens_min,
  // output_tokens] (as if the model stopped there); 0: every answer is output_tokens.
  uint32_t output_tokens_min = 0;
  bool cycle = true;  // true: shuffled once, then sent in a cycle; false: drawn at random
};

struct ChatSpec {
  uint32_t system_prompts = 8;  // distinct system prompts shared by the sessions
  uint32_t system_prompt_tokens = 1000;
  uint32_t min_turns = 2;
  uint32_t max_turns = 8;  // turns per session: uniform in [min_turns, max_turns]
  uint32_t user_tokens = 200;
  uint32_t output_tokens = 300;
  double think_time_s = 5;  // mean of an exponential pause between turns
};

struct TraceSpec {
  std::string path;             // Mooncake JSON lines
  uint32_t block_tokens = 512;  // tokens per hash id
  double time_scale = 1;        // multiplies the trace's timestamps (0.5: twice as fast)
  uint64_t max_requests = 0;    // 0: the whole trace
  double stage_s = 60;          // report bucket width
};

// tenants (tenant_workload.h): one tenant of a multi-tenant workload, which sends its
// own workload (tenant_workloads[i]) with its own arrivals.
struct TenantSpec {
  std::string name;
  double weight = 1;  // fair share (flow control), as in the gateway's keys file
  route::Criticality criticality = route::Criticality::kStandard;
  Nanos deadline = 0;  // relative dispatch deadline (x-kvgate-deadline-ms); 0: none
};

// Latency targets on a share of a workload's requests (its `targets:`; in a tenants mix,
// each tenant's workload has its own): they become RouteRequest::ttft_target /
// tpot_target, honoured by a policy with latency_targets enabled (docs/router.md) and, the
// TTFT target, by flow control's targets_first (docs/flow-control.md).
struct TargetsSpec {
  double fraction = 0;  // 0..1: each request carries the targets with this probability
  Nanos ttft = 0;       // 0: none
  Nanos tpot = 0;       // 0: none
  bool any() const { return fraction > 0 && (ttft > 0 || tpot > 0); }
};

struct WorkloadSpec {
  enum class Kind { kSharedPrefix, kChat, kTrace, kTenants };
  Kind kind = Kind::kSharedPrefix;
  ArrivalSpec arrivals;
  SharedPrefixSpec shared_prefix;
  ChatSpec chat;
  TraceSpec trace;
  uint32_t vocab_size = 151'643;  // Qwen's; token ids are drawn below it
  // kTenants: the tenants and, index by index, what each sends.
  std::vector<TenantSpec> tenants;
  std::vector<WorkloadSpec> tenant_workloads;
  TargetsSpec targets;
  // Whether this workload or one of its tenants' attaches targets.
  bool any_targets() const;
};

// A report stage: a span of arrival time with its nominal (or measured) rate.
struct StageInfo {
  double qps = 0;
  Nanos start = 0;
  Nanos end = 0;
  bool warmup = false;
};

struct WorkloadRequest {
  Nanos arrival = 0;
  PromptPtr prompt;
  uint32_t output_tokens = 0;
  uint32_t stage = 0;
  uint64_t session = 0;  // chat: 1-based session id; 0 otherwise
  uint32_t turn = 0;     // chat: 0-based turn
  // chat: the assistant's reply the engine should emit (output_tokens long), so that the
  // next turn's prompt, which repeats it, can hit the engine's cache; null otherwise.
  PromptPtr reply;
  uint32_t tenant = 0;  // kTenants: index into WorkloadSpec::tenants; 0 otherwise
  // Latency targets (TargetsSpec), 0 = none.
  Nanos ttft_target = 0;
  Nanos tpot_target = 0;
};

class Workload {
 public:
  virtual ~Workload() = default;

  // The next open-loop arrival (nondecreasing times); nullopt when the workload is done.
  virtual std::optional<WorkloadRequest> next() = 0;

  // Closed loop: the request that follows `finished` (chat's next turn), or nullopt.
  virtual std::optional<WorkloadRequest> follow_up(const WorkloadRequest& finished,
                                                   Nanos finished_at) {
    (void)finished;
    (void)finished_at;
    return std::nullopt;
  }

  // The report stages, in time order; request.stage indexes this list.
  virtual const std::vector<StageInfo>& stages() const = 0;
};

// A whole file's bytes by path, or an error (the shells pass env::read_file).
using ReadFile = std::function<Result<std::string>(const std::string& path)>;

// Builds the generator; fails on an unreadable trace or an impossible spec. `read_file`
// reads a trace (kind trace, or a tenant's); it is not kept.
Result<std::unique_ptr<Workload>> make_workload(const WorkloadSpec& spec, uint64_t seed,
                                                const ReadFile& read_file);

// `n` deterministic pseudo-random token ids naming content `piece` (equal pieces give
// equal tokens), appended to `out`.
void append_content(uint64_t piece, size_t n, uint32_t vocab_size, Prompt& out);

// Index of the stage containing `t` (the last stage for times past the end).
uint32_t stage_at(const std::vector<StageInfo>& stages, Nanos t);

}  // namespace kvgate::workload
