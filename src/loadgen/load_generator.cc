#include "loadgen/load_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <deque>

#include "env/file.h"
#include "env/progress.h"
#include "io/http_client.h"
#include "io/upstream_client.h"
#include "openai/stream_reader.h"
#include "workload/workload.h"

namespace kvgate::loadgen {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

class Runner {
 public:
  Runner(const workload::Scenario& scenario, const LoadOptions& options,
         workload::Workload& workload, io::Url url)
      : options_(options),
        workload_(workload),
        url_(std::move(url)),
        model_(options.model.empty() ? scenario.gateway.model : options.model),
        client_(io_.get_executor(), {.connect_timeout = std::chrono::milliseconds(5000),
                                     .head_timeout = std::chrono::milliseconds(
                                         static_cast<int64_t>(options.request_timeout_s * 1000))}),
        bar_(options.label, options.progress) {
    port_ = static_cast<uint16_t>(std::stoi(url_.port.empty() ? "80" : url_.port));
  }

  LoadResult run() {
    start_ = Clock::now();
    if (options_.concurrency > 0) {
      for (uint32_t i = 0; i < options_.concurrency; ++i) {
        asio::co_spawn(io_, closed_loop_worker(), asio::detached);
      }
    } else {
      asio::co_spawn(io_, open_loop_dispatcher(), asio::detached);
    }
    io_.run();
    bar_.finish(fmt::format("{} requests", result_.run.requests.size()));
    result_.run.policy = options_.label;
    result_.run.end_time = virtual_now();
    result_.run.wall_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    result_.stages = workload_.stages();
    return std::move(result_);
  }

 private:
  // Measured time since the start, in the workload's (unscaled) time.
  Nanos virtual_now() const {
    double real = std::chrono::duration<double, std::nano>(Clock::now() - start_).count();
    return static_cast<Nanos>(real / options_.time_scale);
  }

  bool take_slot() {
    if (options_.max_requests > 0 && issued_ >= options_.max_requests) return false;
    ++issued_;
    return true;
  }

  asio::awaitable<void> sleep_until_virtual(Nanos t) {
    auto when = start_ + std::chrono::nanoseconds(
                             static_cast<int64_t>(static_cast<double>(t) * options_.time_scale));
    if (when > Clock::now()) {
      asio::steady_timer timer(io_, when);
      co_await timer.async_wait(asio::use_awaitable);
    }
  }

  asio::awaitable<void> open_loop_dispatcher() {
    while (auto r = workload_.next()) {
      if (!take_slot()) break;
      co_await sleep_until_virtual(r->arrival);
      asio::co_spawn(io_, send_and_follow(std::move(*r)), asio::detached);
    }
  }

  asio::awaitable<void> send_and_follow(workload::WorkloadRequest r) {
    Nanos finished = co_await send_one(r);
    if (auto next = workload_.follow_up(r, finished); next && take_slot()) {
      co_await sleep_until_virtual(next->arrival);
      co_await send_and_follow(std::move(*next));
    }
  }

  asio::awaitable<void> closed_loop_worker() {
    while (true) {
      std::optional<workload::WorkloadRequest> r;
      if (!follow_ups_.empty()) {
        r = std::move(follow_ups_.front());
        follow_ups_.pop_front();
      } else {
        r = workload_.next();
      }
      if (!r || !take_slot()) co_return;
      Nanos finished = co_await send_one(*r);
      if (auto next = workload_.follow_up(*r, finished)) follow_ups_.push_back(std::move(*next));
    }
  }

  std::string body(const workload::WorkloadRequest& r) const {
    json::object b;
    b["model"] = model_;
    std::string text = prompt_text(*r.prompt);
    if (options_.chat) {
      b["messages"] = json::array{json::object{{"role", "user"}, {"content", text}}};
    } else {
      b["prompt"] = text;
    }
    b["max_tokens"] = r.output_tokens;
    b["stream"] = true;
    b["stream_options"] = json::object{{"include_usage", true}};
    b["ignore_eos"] = true;
    return json::serialize(b);
  }

  // Sends one request, records it; returns its finish time (virtual).
  asio::awaitable<Nanos> send_one(const workload::WorkloadRequest& r) {
    workload::RequestRecord rec;
    rec.stage = r.stage;
    rec.arrival = virtual_now();
    rec.prompt_tokens = static_cast<uint32_t>(r.prompt->size());
    io::UpstreamRequest req;
    req.target = options_.chat ? "/v1/chat/completions" : "/v1/completions";
    req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
    if (!options_.api_key.empty())
      req.headers.push_back({"Authorization", "Bearer " + options_.api_key});
    // The workload's latency targets: sent (unless --target-headers none) and recorded,
    // so the report measures whether they were met.
    rec.ttft_target = r.ttft_target;
    rec.tpot_target = r.tpot_target;
    for (auto& h : target_headers(r, options_.target_headers, options_.time_scale)) {
      req.headers.push_back(std::move(h));
    }
    req.body = body(r);
    const auto timeout =
        std::chrono::milliseconds(static_cast<int64_t>(options_.request_timeout_s * 1000));
    auto ex = co_await client_.send(url_.host, port_, std::move(req));
    if (!ex) {
      error(fmt::format("transport: {}", ex.error()));
      co_return finish(std::move(rec));
    }
    const int status = (*ex)->status();
    if (status != 200) {
      auto body_text = co_await (*ex)->read_all(timeout, 64 * 1024);
      if (status == 429 || status == 503) {
        rec.rejected = true;
      } else {
        error(fmt::format("HTTP {}: {}", status, body_text ? *body_text : std::string()));
      }
      co_return finish(std::move(rec));
    }
    openai::StreamReader stream;
    Nanos first_token = -1;
    while (true) {
      auto piece = co_await (*ex)->read_some(timeout);
      if (!piece) {
        error(fmt::format("stream: {}", piece.error()));
        break;
      }
      if (piece->empty()) break;
      const Nanos at = virtual_now();
      if (stream.feed(*piece) > 0 && first_token < 0) first_token = at;
    }
    if (stream.done()) {
      const openai::Usage& usage = stream.usage();
      rec.first_token = first_token;
      rec.finish = virtual_now();
      if (usage.seen) rec.prompt_tokens = static_cast<uint32_t>(usage.prompt_tokens);
      rec.cached_tokens = static_cast<uint32_t>(usage.cached_tokens);
      rec.output_tokens =
          static_cast<uint32_t>(usage.seen ? usage.completion_tokens : stream.content_chunks());
    }
    co_return finish(std::move(rec));
  }

  Nanos finish(workload::RequestRecord rec) {
    Nanos t = rec.finish >= 0 ? rec.finish : virtual_now();
    result_.run.requests.push_back(rec);
    const auto& stages = workload_.stages();
    double total = stages.empty() ? 1.0 : static_cast<double>(stages.back().end);
    double frac = options_.max_requests > 0 ? static_cast<double>(result_.run.requests.size()) /
                                                  static_cast<double>(options_.max_requests)
                                            : static_cast<double>(t) / std::max(1.0, total);
    bar_.update(std::min(1.0, frac), fmt::format("{} done", result_.run.requests.size()));
    return t;
  }

  void error(std::string message) {
    ++result_.errors;
    if (result_.error_samples.size() < 5) result_.error_samples.push_back(std::move(message));
  }

  const LoadOptions& options_;
  workload::Workload& workload_;
  io::Url url_;
  std::string model_;
  uint16_t port_ = 80;
  asio::io_context io_;
  io::UpstreamClient client_;
  env::ProgressBar bar_;
  Clock::time_point start_;
  uint64_t issued_ = 0;
  std::deque<workload::WorkloadRequest> follow_ups_;
  LoadResult result_;
};

}  // namespace

std::string prompt_text(const std::vector<uint32_t>& tokens) {
  std::string text;
  text.reserve(tokens.size() * 7);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) text += ' ';
    text += 't';
    text += std::to_string(tokens[i]);
  }
  return text;
}

std::vector<std::pair<std::string, std::string>> target_headers(const workload::WorkloadRequest& r,
                                                                TargetHeaders names,
                                                                double time_scale) {
  std::vector<std::pair<std::string, std::string>> out;
  if (names == TargetHeaders::kNone) return out;
  const bool llmd = names == TargetHeaders::kLlmd;
  // Real milliseconds, rounded up (a target is never sent tighter than the workload's).
  const auto ms = [&](Nanos target) {
    const int64_t real = std::llround(static_cast<double>(target) * time_scale);  // ns
    return std::to_string(std::max<int64_t>(1, (real + kMillisecond - 1) / kMillisecond));
  };
  if (r.ttft_target > 0)
    out.emplace_back(llmd ? "x-slo-ttft-ms" : "x-kvgate-ttft-ms", ms(r.ttft_target));
  if (r.tpot_target > 0)
    out.emplace_back(llmd ? "x-slo-tpot-ms" : "x-kvgate-tpot-ms", ms(r.tpot_target));
  return out;
}

Result<LoadResult> run_load(const workload::Scenario& scenario, const LoadOptions& options) {
  if (options.time_scale <= 0) return Error("--time-scale must be positive");
  Result<io::Url> url = io::parse_url(options.url);
  if (!url) return Error(url.error());
  Result<std::unique_ptr<workload::Workload>> workload =
      workload::make_workload(scenario.workload, scenario.seed, env::read_file);
  if (!workload) return Error(workload.error());
  Runner runner(scenario, options, **workload, *url);
  LoadResult result = runner.run();
  // The report's targets table (attainment, p90 TTFT of the others) when the workload
  // attaches targets; no predictor figures: they are the gateway's.
  result.run.latency_targets = scenario.workload.any_targets();
  return result;
}

}  // namespace kvgate::loadgen
