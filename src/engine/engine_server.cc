#include "engine/engine_server.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/common/rng.h"
#include "core/engine/engine_model.h"
#include "core/engine/greedy_decode.h"
#include "core/route/data_parallel.h"
#include "engine/embedding.h"
#include "engine/engine_metrics_text.h"
#include "engine/startup_log.h"
#include "env/system_clock.h"
#include "io/http_server.h"
#include "io/kv_event_publisher.h"
#include "openai/anthropic.h"
#include "openai/engine_api.h"
#include "openai/error.h"
#include "openai/responses.h"

namespace kvgate::engine_server {
namespace {

namespace net = boost::asio;
namespace json = boost::json;
// The engine's model time runs on Asio's timers (wall_at), so on steady_clock itself;
// the wire's wall-clock times come from EngineServerOptions::clock.
using SteadyClock = std::chrono::steady_clock;
using engine::RequestId;

// POST /v1/embeddings, /score and /rerank: one engine request per input (each a prefill
// and one token), answered together once the last is done. Engine thread only, once
// submitted.
struct EmbeddingJob {
  enum class Kind : uint8_t { kEmbeddings, kScore, kRerank };
  Kind kind = Kind::kEmbeddings;
  std::shared_ptr<io::ResponseStream> stream;
  bool base64 = false;
  uint32_t size = 0;  // values per embedding
  std::string model;
  int64_t created = 0;
  std::vector<RequestId> ids;                    // per input, in order
  std::vector<std::vector<kv::TokenId>> tokens;  // per input, until its embedding is made
  std::vector<std::vector<float>> vectors;       // per input, once done
  // Score and rerank: each input is a pair's two texts' tokens, the second from split[i];
  // its relevance once done.
  std::vector<size_t> split;
  std::vector<double> scores;
  std::vector<std::string> documents;  // rerank: the documents, in order
  uint32_t top_n = 0;                  // rerank: 0 for all
  size_t left = 0;
  uint32_t prompt_tokens = 0;
  bool answered = false;
};

struct Pending {
  std::shared_ptr<io::ResponseStream> stream;
  std::shared_ptr<EmbeddingJob> embedding;  // set: this request is an embedding input
  size_t embedding_index = 0;
  openai::ApiKind kind = openai::ApiKind::kCompletion;
  // Messages and Responses are answered in their own shapes.
  openai::Dialect dialect = openai::Dialect::kOpenAi;
  // Responses: the answer's fields, the next event's sequence number, and the prompt's
  // messages (JSON) stored with the answer when the request asked to store it.
  openai::responses::Answer answer;
  uint64_t seq = 0;
  bool store = false;
  std::string messages;
  bool streaming = false;
  bool include_usage = false;
  bool remote_decode = false;  // a P/D prefill: answer with kv_transfer_params
  openai::ResponseIds ids;
  std::string text;  // whole responses accumulate here
  uint32_t produced = 0;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
  bool role_sent = false;
  // return_token_ids: the prompt's ids (sent once) and, for a whole answer, the output's.
  bool return_token_ids = false;
  std::vector<kv::TokenId> prompt_ids;
  std::vector<kv::TokenId> output_ids;
};

// A Responses API answer kept for the requests that continue it (previous_response_id):
// the prompt's messages (JSON) and the answer's text, as vLLM's response store keeps them,
// and the response object (JSON) for GET /v1/responses/{id}.
struct StoredResponse {
  std::string messages;
  std::string output;
  std::string response;
};
// The most responses kept; past it the oldest goes (vLLM's store keeps them all).
constexpr size_t kStoredResponses = 10'000;

// Responses API answers by id (I/O threads read, engine threads write), one store for
// all the data-parallel ranks: vLLM's is the API server's, in front of its engine cores.
struct ResponseStore {
  mutable std::mutex mu;
  std::unordered_map<std::string, StoredResponse> stored;
  std::deque<std::string> order;
};

// Names, in the answer's head, the data-parallel rank that serves it (x-kvgate-dp-rank,
// not vLLM's: tests and operators see where a request went). Forwards everything else.
class RankStream final : public io::ResponseStream {
 public:
  RankStream(std::shared_ptr<io::ResponseStream> inner, uint32_t rank)
      : inner_(std::move(inner)), rank_(std::to_string(rank)) {}

  void respond(io::HttpResponse response) override {
    response.headers.push_back({"x-kvgate-dp-rank", rank_});
    inner_->respond(std::move(response));
  }
  void start(int status, std::string content_type, std::vector<io::HttpHeader> headers) override {
    headers.push_back({"x-kvgate-dp-rank", rank_});
    inner_->start(status, std::move(content_type), std::move(headers));
  }
  void write(std::string chunk, std::function<void()> on_flushed) override {
    inner_->write(std::move(chunk), std::move(on_flushed));
  }
  void finish() override { inner_->finish(); }
  void abort() override { inner_->abort(); }
  size_t pending_bytes() const override { return inner_->pending_bytes(); }
  bool closed() const override { return inner_->closed(); }
  void on_close(std::function<void()> callback) override { inner_->on_close(std::move(callback)); }
  void watch_client() override { inner_->watch_client(); }
  bool preempted() const override { return inner_->preempted(); }

 private:
  std::shared_ptr<io::ResponseStream> inner_;
  std::string rank_;
};

// The paths that run a request on an engine core: what a data-parallel engine hands to
// a rank. The others (/tokenize, /v1/models, a stored response, ...) the first rank
// answers.
bool runs_on_a_rank(std::string_view path) {
  return path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/messages" ||
         path == "/v1/responses" || path == "/v1/embeddings" || path == "/score" ||
         path == "/v1/score" || path == "/rerank" || path == "/v1/rerank" || path == "/v2/rerank";
}

// Rank r's options: its KV event endpoints offset by r as vLLM's publisher offsets them,
// its own seed; no startup of its own (the first rank's phases stand for the server's)
// and nothing announced.
EngineServerOptions rank_options(const EngineServerOptions& o, uint32_t rank) {
  EngineServerOptions r = o;
  r.kv_events_endpoint = route::dp_rank_zmq_endpoint(o.kv_events_endpoint, rank);
  r.replay_endpoint = route::dp_rank_zmq_endpoint(o.replay_endpoint, rank);
  r.seed = o.seed + rank;
  r.startup = engine::StartupMode::kNone;
  r.announce = false;
  return r;
}

// A request parsed and tokenized on an I/O thread, on its way to the engine thread.
struct Submission {
  engine::EngineRequest request;
  Pending pending;
  bool may_stall = true;
};

uint64_t default_kv_bytes_per_token(const engine::Profile& p) {
  // K and V, bf16: layers x kv_heads x head_dim x 2 x 2 bytes (docs/engine.md).
  if (p.name.find("32b") != std::string::npos) return 64ull * 8 * 128 * 2 * 2;  // Qwen3-32B
  return 28ull * 4 * 128 * 2 * 2;                                               // Qwen2.5-7B
}

std::string random_hex(Rng& rng) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(rng.next()),
                static_cast<unsigned long long>(rng.next()));
  return buf;
}

// The model's configuration: the engine's, with its LoRA slots and their load time from
// the server's options (--max-loras, --lora-load-ms).
engine::EngineConfig model_config(const EngineServerOptions& o) {
  engine::EngineConfig c = o.engine;
  c.max_loras = o.max_loras;
  c.lora_load_time = static_cast<Nanos>(o.lora_load_ms) * kMillisecond;
  return c;
}

// An error answer as vLLM's server words it (openai/error.h).
io::HttpResponse vllm_error(int status, std::string_view message) {
  return io::HttpResponse{status, "application/json", {}, openai::vllm_error_json(status, message)};
}

}  // namespace

struct EngineServer::Impl {
  Impl(const EngineServerOptions& o, engine::Profile profile, std::shared_ptr<TextCodec> c)
      : opt(o),
        clock(o.clock ? *o.clock : env::system_clock()),
        model(model_config(o), std::move(profile)),
        codec(std::move(c)),
        rng(o.seed),
        id_rng(static_cast<uint64_t>(SteadyClock::now().time_since_epoch().count()) ^
               (static_cast<uint64_t>(getpid()) << 32)) {}

  EngineServerOptions opt;
  const kvgate::Clock& clock;        // wall-clock times on the wire ("created", KV event batches)
  engine::EngineModel model;         // engine thread only
  std::shared_ptr<TextCodec> codec;  // shared by the data-parallel ranks (const use)
  Rng rng;     // engine thread only: fault injection (reproducible with --seed)
  Rng id_rng;  // engine thread only: response and engine ids (unique per process)

  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread thread;
  net::steady_timer step_timer{ioc};
  net::steady_timer startup_timer{ioc};
  uint64_t timer_gen = 0;
  bool stepping = false;
  Nanos last_end = 0;
  SteadyClock::time_point t0 = SteadyClock::now();
  engine::StepResult result;
  std::unordered_map<RequestId, Pending> pending;
  std::atomic<uint64_t> next_id{1};
  std::string engine_id;
  uint64_t kv_bytes_per_token = 0;

  std::atomic<bool> is_ready{false};
  mutable std::mutex ready_mu;
  mutable std::condition_variable ready_cv;
  bool stopped = false;

  // LoRA adapters served by name, in load order (any thread, under lora_mu; written on
  // the engine thread): vLLM's registered adapters, what /v1/models lists and a request's
  // `model` may name. Which of them hold one of the model's max_loras slots is the
  // model's business: a request for one that was evicted loads it again (the model
  // charges the load to the step that schedules it).
  struct Adapter {
    std::string name;
    std::string path;
    int64_t id = 0;
  };
  mutable std::mutex lora_mu;
  std::vector<Adapter> adapters;
  int64_t next_lora_id = 1;
  std::optional<Adapter> adapter(std::string_view name) const {
    std::lock_guard lock(lora_mu);
    for (const Adapter& a : adapters) {
      if (a.name == name) return a;
    }
    return std::nullopt;
  }
  void add_adapter(std::string name, std::string path) {
    std::lock_guard lock(lora_mu);
    for (Adapter& a : adapters) {
      if (a.name == name) {
        a.path = std::move(path);  // in place: the same id
        return;
      }
    }
    adapters.push_back({std::move(name), std::move(path), next_lora_id++});
  }
  // Engine thread: adapters being loaded (POST /v1/load_lora_adapter), by name, with the
  // model time their load ends; a second load of one waits for the first.
  std::unordered_map<std::string, Nanos> lora_loading;

  // Responses API answers by id: the first rank's, shared by the others.
  std::shared_ptr<ResponseStore> store = std::make_shared<ResponseStore>();

  std::optional<StoredResponse> stored_response(const std::string& id) const {
    std::lock_guard lock(store->mu);
    auto it = store->stored.find(id);
    if (it == store->stored.end()) return std::nullopt;
    return it->second;
  }
  void store_response(const std::string& id, StoredResponse r) {
    std::lock_guard lock(store->mu);
    if (!store->stored.insert_or_assign(id, std::move(r)).second) return;
    store->order.push_back(id);
    if (store->order.size() > kStoredResponses) {
      store->stored.erase(store->order.front());
      store->order.pop_front();
    }
  }

  // Data parallelism (EngineServerOptions::data_parallel_size): this engine core's rank.
  // The first rank owns the HTTP server and the other ranks, and lists every rank in
  // order, itself first (constant once started).
  uint32_t rank = 0;
  std::vector<Impl*> ranks;
  std::vector<std::unique_ptr<Impl>> other_ranks;
  uint16_t http_port = 0;  // the server's (kv_transfer_params), set before any thread runs
  // What the first rank's balancer reads of this rank, vLLM's per-engine waiting and
  // running counts: set on the engine thread after each step, the waiting count raised
  // at once by the balancer for each request it hands over (as vLLM's client does
  // between two stats updates).
  std::atomic<uint32_t> lb_waiting{0};
  std::atomic<uint32_t> lb_running{0};

  std::unique_ptr<io::KvEventPublisher> publisher;
  std::unique_ptr<io::HttpServer> http;

  Nanos model_now() const {
    const double wall = static_cast<double>((SteadyClock::now() - t0).count());
    return static_cast<Nanos>(wall / opt.time_scale);
  }
  SteadyClock::time_point wall_at(Nanos t) const {
    return t0 + std::chrono::nanoseconds(
                    static_cast<int64_t>(std::llround(static_cast<double>(t) * opt.time_scale)));
  }

  // I/O threads. handle: the server's (the first rank's) entry: a data-parallel engine
  // picks the rank of a generation and answers /health and /metrics for all ranks;
  // serve: this rank's answer.
  void handle(io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> s);
  void serve(io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> s);
  // X-data-parallel-rank as vLLM reads it (not an integer: ignored; out of range: 400),
  // else the balancer's pick.
  std::variant<uint32_t, io::HttpResponse> pick_rank(const io::HttpRequest& req);
  // /metrics of every rank, each copied on its engine thread, rendered together.
  void respond_rank_metrics(std::shared_ptr<io::ResponseStream> s);
  // One stderr line for a request with a traceparent: "kvgate engine: request N PATH
  // id=X-REQUEST-ID traceparent=VALUE [tracestate=VALUE]".
  void log_traceparent(const io::HttpRequest& req, std::string_view traceparent);
  std::atomic<uint64_t> traced_requests{0};
  // Messages and Responses: the body is taken as the chat request it stands for.
  void handle_completion(const io::HttpRequest& req, openai::ApiKind kind,
                         std::shared_ptr<io::ResponseStream> s,
                         openai::Dialect dialect = openai::Dialect::kOpenAi);
  void deliver_responses(Pending& p, const engine::RequestUpdate& u, const openai::Usage& usage);
  void handle_tokenize(const io::HttpRequest& req, const std::shared_ptr<io::ResponseStream>& s);
  // POST /v1/messages/count_tokens: the Messages body rendered as /v1/messages renders it,
  // its tokens counted.
  void handle_count_tokens(const io::HttpRequest& req,
                           const std::shared_ptr<io::ResponseStream>& s);
  void handle_detokenize(const io::HttpRequest& req, const std::shared_ptr<io::ResponseStream>& s);
  void handle_lora(const io::HttpRequest& req, std::shared_ptr<io::ResponseStream> s, bool load);
  void handle_embeddings(const io::HttpRequest& req, std::shared_ptr<io::ResponseStream> s);
  void handle_scoring(const io::HttpRequest& req, std::shared_ptr<io::ResponseStream> s,
                      bool rerank);
  // The inputs of `job` (its tokens, set) to the engine thread, one request each.
  void start_pooling(std::shared_ptr<EmbeddingJob> job, std::shared_ptr<io::ResponseStream> s);
  // An input's tokens, or the error answer: the text encoded (with the special tokens an
  // embedding model adds) or the ids given, cut to the last `truncate` tokens, and checked
  // against the model's length.
  std::variant<std::vector<kv::TokenId>, io::HttpResponse> pooling_tokens(
      const std::optional<std::string>& text, std::vector<kv::TokenId> ids,
      std::optional<uint32_t> truncate) const;
  io::HttpResponse models_response() const;

  // Engine thread.
  void submit(std::shared_ptr<Submission> sub);
  void kick();
  void on_step_end(uint64_t gen);
  void deliver();
  void deliver_update(const engine::RequestUpdate& u);
  void abort_request(RequestId id);
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter, checked: the model's slots
  // and the adapters served.
  void load_lora(const std::string& name, const std::string& path,
                 const std::shared_ptr<io::ResponseStream>& s);
  void unload_lora(const std::string& name, const std::shared_ptr<io::ResponseStream>& s);
  void refuse(Pending& p, io::HttpResponse r);
  void embedding_done(Pending& p, const engine::RequestUpdate& u);
  void publish(const std::vector<kv::KvEvent>& events);
  void run_startup(std::vector<engine::StartupPhase> phases, size_t i, Nanos at);
  void set_ready();
  std::string kv_transfer_json(const engine::RequestUpdate& u) const;
};

void EngineServer::Impl::handle(io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> s) {
  if (ranks.size() <= 1) return serve(std::move(req), std::move(s));
  const std::string& path = req.path;
  if (path == "/health") {
    if (req.method != "GET") return s->respond(vllm_error(405, "method not allowed"));
    for (const Impl* r : ranks) {
      if (!r->is_ready.load()) return s->respond(vllm_error(503, "engine is starting"));
    }
    return s->respond(io::HttpResponse{200, "application/json", {}, ""});
  }
  if (path == "/metrics") {
    if (req.method != "GET") return s->respond(vllm_error(405, "method not allowed"));
    return respond_rank_metrics(std::move(s));
  }
  if (!runs_on_a_rank(path)) return serve(std::move(req), std::move(s));
  auto picked = pick_rank(req);
  if (auto* refused = std::get_if<io::HttpResponse>(&picked)) {
    return s->respond(std::move(*refused));
  }
  const uint32_t r = std::get<uint32_t>(picked);
  ranks[r]->serve(std::move(req), std::make_shared<RankStream>(std::move(s), r));
}

std::variant<uint32_t, io::HttpResponse> EngineServer::Impl::pick_rank(const io::HttpRequest& req) {
  const auto n = static_cast<uint32_t>(ranks.size());
  if (const auto h = req.header(route::kDataParallelRankHeader)) {
    int64_t v = 0;
    const char* end = h->data() + h->size();
    auto [p, ec] = std::from_chars(h->data(), end, v);
    if (ec == std::errc() && p == end) {
      if (v < 0 || v >= static_cast<int64_t>(n)) {
        return vllm_error(400, fmt::format("data_parallel_rank {} is out of range [0, {}).", v, n));
      }
      return static_cast<uint32_t>(v);
    }
  }
  // vLLM's balancer: the least waiting x 4 + running, the lowest rank on a tie.
  uint32_t best = 0;
  uint64_t best_score = UINT64_MAX;
  for (uint32_t r = 0; r < n; ++r) {
    const uint64_t score = uint64_t{ranks[r]->lb_waiting.load(std::memory_order_relaxed)} * 4 +
                           ranks[r]->lb_running.load(std::memory_order_relaxed);
    if (score < best_score) {
      best_score = score;
      best = r;
    }
  }
  ranks[best]->lb_waiting.fetch_add(1, std::memory_order_relaxed);
  return best;
}

void EngineServer::Impl::respond_rank_metrics(std::shared_ptr<io::ResponseStream> s) {
  struct Gather {
    std::mutex mu;
    std::vector<EngineMetricsView> views;
    size_t left = 0;
  };
  auto g = std::make_shared<Gather>();
  g->views.resize(ranks.size());
  g->left = ranks.size();
  for (size_t i = 0; i < ranks.size(); ++i) {
    Impl* r = ranks[i];
    net::post(r->ioc, [this, g, s, r, i] {
      EngineMetricsView v = metrics_view(r->model);
      std::lock_guard lock(g->mu);
      g->views[i] = std::move(v);
      if (--g->left > 0) return;
      s->respond(
          io::HttpResponse{200,
                           "text/plain; version=0.0.4; charset=utf-8",
                           {},
                           render_engine_metrics(std::span<const EngineMetricsView>(g->views), opt,
                                                 to_seconds(clock.wall_now()))});
    });
  }
}

void EngineServer::Impl::serve(io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> s) {
  const std::string& path = req.path;
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  // Trace context (docs/tracing.md): a request that carries a traceparent (a generation,
  // /tokenize, a stored response, ...) is logged with it, one line on stderr, so that a
  // trace can be followed through the engines.
  if (const auto tp = req.header("traceparent")) log_traceparent(req, *tp);
  if (path == "/health") {
    if (!get) return s->respond(vllm_error(405, "method not allowed"));
    if (is_ready.load()) return s->respond(io::HttpResponse{200, "application/json", {}, ""});
    return s->respond(vllm_error(503, "engine is starting"));
  }
  if (path == "/metrics") {
    if (!get) return s->respond(vllm_error(405, "method not allowed"));
    net::post(ioc, [this, s] {
      s->respond(io::HttpResponse{200,
                                  "text/plain; version=0.0.4; charset=utf-8",
                                  {},
                                  render_engine_metrics(model, opt, to_seconds(clock.wall_now()))});
    });
    return;
  }
  if (path == "/v1/models") {
    if (!get) return s->respond(vllm_error(405, "method not allowed"));
    return s->respond(models_response());
  }
  if (path == "/tokenize") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_tokenize(req, s);
  }
  if (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_lora(req, std::move(s), path == "/v1/load_lora_adapter");
  }
  if (path == "/detokenize") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_detokenize(req, s);
  }
  if (path == "/v1/embeddings") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_embeddings(req, std::move(s));
  }
  if (path == "/v1/messages") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_completion(req, openai::ApiKind::kChat, std::move(s),
                             openai::Dialect::kAnthropic);
  }
  if (path == "/v1/responses") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_completion(req, openai::ApiKind::kChat, std::move(s),
                             openai::Dialect::kResponses);
  }
  if (path == "/v1/messages/count_tokens") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_count_tokens(req, s);
  }
  if (constexpr std::string_view kStored = "/v1/responses/";
      path.size() > kStored.size() && path.starts_with(kStored) &&
      path.find('/', kStored.size()) == std::string::npos) {
    // A stored response by id (vLLM: GET only; POST .../cancel is for background
    // responses, which this engine does not run).
    if (!get) return s->respond(vllm_error(405, "method not allowed"));
    const std::string id = path.substr(kStored.size());
    std::optional<StoredResponse> r = stored_response(id);
    if (!r) return s->respond(vllm_error(404, "Response with id '" + id + "' not found."));
    return s->respond(io::HttpResponse{200, "application/json", {}, std::move(r->response)});
  }
  if (path == "/score" || path == "/v1/score" || path == "/rerank" || path == "/v1/rerank" ||
      path == "/v2/rerank") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_scoring(req, std::move(s), path.ends_with("rerank"));
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) return s->respond(vllm_error(405, "method not allowed"));
    return handle_completion(
        req, path == "/v1/completions" ? openai::ApiKind::kCompletion : openai::ApiKind::kChat,
        std::move(s));
  }
  s->respond(vllm_error(404, "Not Found: " + path));
}

io::HttpResponse EngineServer::Impl::models_response() const {
  json::object card;
  card["id"] = opt.served_model_name;
  card["object"] = "model";
  card["created"] = clock.wall_now() / kSecond;
  card["owned_by"] = "vllm";
  card["root"] = opt.served_model_name;
  card["parent"] = nullptr;
  card["max_model_len"] = model.config().max_model_len;
  json::array data;
  data.push_back(std::move(card));
  {
    std::lock_guard lock(lora_mu);
    for (const Adapter& a : adapters) {
      json::object c;
      c["id"] = a.name;
      c["object"] = "model";
      c["created"] = clock.wall_now() / kSecond;
      c["owned_by"] = "vllm";
      c["root"] = a.path;
      c["parent"] = opt.served_model_name;
      c["max_model_len"] = nullptr;
      data.push_back(std::move(c));
    }
  }
  json::object body;
  body["object"] = "list";
  body["data"] = std::move(data);
  return io::HttpResponse{200, "application/json", {}, json::serialize(body)};
}

void EngineServer::Impl::handle_tokenize(const io::HttpRequest& req,
                                         const std::shared_ptr<io::ResponseStream>& s) {
  if (opt.tokenize_fail) return s->respond(vllm_error(500, "tokenizer failure (injected)"));
  auto parsed = openai::parse_tokenize_request(req.body);
  if (!parsed) {
    return s->respond(vllm_error(kvgate::http_status(parsed.code()), parsed.error()));
  }
  const openai::TokenizeRequest& t = *parsed;
  auto tokens = t.prompt ? codec->encode(*t.prompt, t.add_special_tokens)
                         : codec->encode_chat(t.chat, t.add_special_tokens);
  if (!tokens) return s->respond(vllm_error(400, tokens.error()));
  std::optional<std::vector<std::string>> strs;
  if (t.return_token_strs) {
    auto got = codec->token_strs(*tokens);
    if (!got) return s->respond(vllm_error(400, got.error()));
    strs = std::move(*got);
  }
  io::HttpResponse r{200,
                     "application/json",
                     {},
                     openai::render_tokenize_response(*tokens, model.config().max_model_len,
                                                      strs ? &*strs : nullptr)};
  if (opt.tokenize_delay_ms == 0) return s->respond(std::move(r));
  auto timer =
      std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(opt.tokenize_delay_ms));
  timer->async_wait([timer, s, r = std::move(r)](boost::system::error_code) mutable {
    s->respond(std::move(r));
  });
}

void EngineServer::Impl::handle_count_tokens(const io::HttpRequest& req,
                                             const std::shared_ptr<io::ResponseStream>& s) {
  auto error = [](int status, std::string_view message) {
    return io::HttpResponse{
        status, "application/json", {}, openai::anthropic::error_json(status, message)};
  };
  auto chat = openai::anthropic::count_tokens_to_chat(req.body);
  if (!chat) return s->respond(error(kvgate::http_status(chat.code()), chat.error()));
  auto parsed = openai::parse_completion_request(*chat, openai::ApiKind::kChat);
  if (!parsed) {
    return s->respond(error(kvgate::http_status(parsed.code()), parsed.error()));
  }
  const openai::CompletionRequest& c = *parsed;
  if (!c.model.empty() && c.model != opt.served_model_name && !adapter(c.model)) {
    return s->respond(error(404, "The model `" + c.model + "` does not exist."));
  }
  auto tokens = codec->encode_chat(c.chat, c.add_special_tokens);
  if (!tokens) return s->respond(error(400, tokens.error()));
  s->respond(io::HttpResponse{
      200,
      "application/json",
      {},
      openai::anthropic::render_count_tokens(static_cast<uint32_t>(tokens->size()))});
}

namespace {

// vLLM's success answers of the LoRA endpoints: plain text.
io::HttpResponse lora_text(std::string body) {
  return io::HttpResponse{200, "text/plain; charset=utf-8", {}, std::move(body)};
}

}  // namespace

void EngineServer::Impl::handle_lora(const io::HttpRequest& req,
                                     std::shared_ptr<io::ResponseStream> s, bool load) {
  boost::system::error_code ec;
  json::value v = json::parse(req.body, ec);
  if (ec || !v.is_object())
    return s->respond(vllm_error(400, "request body must be a JSON object"));
  const json::object& o = v.as_object();
  auto field = [&](std::string_view key) {
    const json::value* f = o.if_contains(key);
    return f && f->is_string() ? std::string(f->as_string()) : std::string();
  };
  const std::string name = field("lora_name");
  if (!load) {
    if (name.empty()) {
      return s->respond(
          vllm_error(400, "'lora_name' needs to be provided to unload a LoRA adapter."));
    }
    net::post(ioc, [this, s = std::move(s), name] { unload_lora(name, s); });
    return;
  }
  const std::string path = field("lora_path");
  if (name.empty() || path.empty()) {
    return s->respond(vllm_error(400, "Both 'lora_name' and 'lora_path' must be provided."));
  }
  if (model.config().max_loras == 0) {
    return s->respond(vllm_error(400, "LoRA is not enabled: start the engine with --max-loras N"));
  }
  bool inplace = false;
  if (const json::value* f = o.if_contains("load_inplace"); f && f->is_bool()) {
    inplace = f->as_bool();
  }
  if (adapter(name) && !inplace) {
    return s->respond(vllm_error(
        400, "The lora adapter '" + name +
                 "' has already been loaded. If you want to load the adapter in place, set "
                 "'load_inplace' to True."));
  }
  net::post(ioc, [this, s = std::move(s), name, path] { load_lora(name, path, s); });
}

void EngineServer::Impl::load_lora(const std::string& name, const std::string& path,
                                   const std::shared_ptr<io::ResponseStream>& s) {
  // Into one of the model's slots (a free one, else in place of the least recently used
  // adapter no running request uses): the model loads it after the step in progress,
  // --lora-load-ms long, its next step waiting for it; one in a slot already is ready
  // at once. The answer, and the adapter's first request, come when it is loaded.
  const Nanos now = std::max(model_now(), last_end);
  Result<Nanos> loaded = model.load_adapter(name, now);
  if (!loaded) {
    // Every slot is held by running requests (vLLM would load it into its CPU cache and
    // swap it in later; the model has no such cache): try again when one finishes.
    return s->respond(vllm_error(503, "Loading lora " + name + " failed: " + loaded.error()));
  }
  Nanos ready = *loaded;
  if (auto it = lora_loading.find(name); it != lora_loading.end()) {
    ready = std::max(ready, it->second);  // loading already: not served before that ends
  }
  auto done = [this, s, name, path, ready] {
    if (auto it = lora_loading.find(name); it != lora_loading.end() && it->second <= ready) {
      lora_loading.erase(it);
    }
    add_adapter(name, path);
    s->respond(lora_text("Success: LoRA adapter '" + name + "' added successfully."));
  };
  if (ready <= now) return done();
  lora_loading[name] = ready;
  // The load runs on the model's clock, scaled to wall time like a step.
  auto timer = std::make_shared<net::steady_timer>(ioc, wall_at(ready));
  timer->async_wait([timer, done](boost::system::error_code) { done(); });
}

void EngineServer::Impl::unload_lora(const std::string& name,
                                     const std::shared_ptr<io::ResponseStream>& s) {
  {
    std::lock_guard lock(lora_mu);
    auto it = std::find_if(adapters.begin(), adapters.end(),
                           [&](const Adapter& a) { return a.name == name; });
    if (it == adapters.end()) {
      return s->respond(vllm_error(404, "The lora adapter '" + name + "' cannot be found."));
    }
    adapters.erase(it);
  }
  // Its slot is freed, unless running requests use it: they finish with it, and it then
  // stays in its slot until evicted as any idle adapter is. Requests already waiting for
  // it load it again when they are scheduled.
  model.unload_adapter(name);
  s->respond(lora_text("Success: LoRA adapter '" + name + "' removed successfully."));
}

void EngineServer::Impl::handle_detokenize(const io::HttpRequest& req,
                                           const std::shared_ptr<io::ResponseStream>& s) {
  auto parsed = openai::parse_detokenize_request(req.body);
  if (!parsed) {
    return s->respond(vllm_error(kvgate::http_status(parsed.code()), parsed.error()));
  }
  const openai::DetokenizeRequest& d = *parsed;
  if (!d.model.empty() && d.model != opt.served_model_name) {
    return s->respond(vllm_error(404, "The model `" + d.model + "` does not exist."));
  }
  auto text = codec->decode(d.tokens);
  if (!text) return s->respond(vllm_error(400, text.error()));
  s->respond(
      io::HttpResponse{200, "application/json", {}, openai::render_detokenize_response(*text)});
}

void EngineServer::Impl::handle_embeddings(const io::HttpRequest& req,
                                           std::shared_ptr<io::ResponseStream> s) {
  if (!is_ready.load()) return s->respond(vllm_error(503, "engine is starting"));
  auto parsed = openai::parse_embedding_request(req.body);
  if (!parsed) {
    return s->respond(vllm_error(kvgate::http_status(parsed.code()), parsed.error()));
  }
  openai::EmbeddingRequest& e = *parsed;
  if (!e.model.empty() && e.model != opt.served_model_name) {
    return s->respond(vllm_error(404, "The model `" + e.model + "` does not exist."));
  }
  if (e.dimensions && *e.dimensions > opt.embedding_size) {
    return s->respond(
        vllm_error(400, fmt::format("Dimensions must be at most {}: the model's embedding size",
                                    opt.embedding_size)));
  }
  auto job = std::make_shared<EmbeddingJob>();
  job->base64 = e.base64;
  job->size = e.dimensions.value_or(opt.embedding_size);
  job->model = opt.served_model_name;
  job->created = clock.wall_now() / kSecond;
  for (openai::EmbeddingInput& in : e.inputs) {
    auto tokens = pooling_tokens(in.text, std::move(in.tokens), e.truncate_prompt_tokens);
    if (auto* r = std::get_if<io::HttpResponse>(&tokens)) return s->respond(std::move(*r));
    job->tokens.push_back(std::move(std::get<std::vector<kv::TokenId>>(tokens)));
  }
  start_pooling(std::move(job), std::move(s));
}

std::variant<std::vector<kv::TokenId>, io::HttpResponse> EngineServer::Impl::pooling_tokens(
    const std::optional<std::string>& text, std::vector<kv::TokenId> ids,
    std::optional<uint32_t> truncate) const {
  if (text) {
    // vLLM's embedding models add their special tokens (CLS/EOS) to each input.
    auto got = codec->encode(*text, /*add_special_tokens=*/true);
    if (!got) return vllm_error(400, got.error());
    ids = std::move(*got);
  }
  if (truncate && ids.size() > *truncate) {
    ids.erase(ids.begin(), ids.end() - static_cast<ptrdiff_t>(*truncate));
  }
  if (ids.empty()) return vllm_error(400, "an input is empty");
  const uint32_t max_len = model.config().max_model_len;
  if (ids.size() > max_len) {
    return vllm_error(400, fmt::format("This model's maximum context length is {} tokens. "
                                       "However, you requested {} tokens in the input. Please "
                                       "reduce the length of the input.",
                                       max_len, ids.size()));
  }
  return ids;
}

void EngineServer::Impl::handle_scoring(const io::HttpRequest& req,
                                        std::shared_ptr<io::ResponseStream> s, bool rerank) {
  if (!is_ready.load()) return s->respond(vllm_error(503, "engine is starting"));
  std::string model_name;
  std::vector<std::pair<std::string, std::string>> pairs;
  std::optional<uint32_t> truncate;
  auto job = std::make_shared<EmbeddingJob>();
  if (rerank) {
    auto parsed = openai::parse_rerank_request(req.body);
    if (!parsed) {
      return s->respond(vllm_error(kvgate::http_status(parsed.code()), parsed.error()));
    }
    openai::RerankRequest& r = *parsed;
    model_name = std::move(r.model);
    for (const std::string& d : r.documents) pairs.emplace_back(r.query, d);
    job->documents = std::move(r.documents);
    job->top_n = r.top_n;
    truncate = r.truncate_prompt_tokens;
    job->kind = EmbeddingJob::Kind::kRerank;
  } else {
    auto parsed = openai::parse_score_request(req.body);
    if (!parsed) {
      return s->respond(vllm_error(kvgate::http_status(parsed.code()), parsed.error()));
    }
    openai::ScoreRequest& r = *parsed;
    model_name = std::move(r.model);
    pairs = std::move(r.pairs);
    truncate = r.truncate_prompt_tokens;
    job->kind = EmbeddingJob::Kind::kScore;
  }
  if (!model_name.empty() && model_name != opt.served_model_name) {
    return s->respond(vllm_error(404, "The model `" + model_name + "` does not exist."));
  }
  job->model = opt.served_model_name;
  job->created = clock.wall_now() / kSecond;
  // A cross-encoder reads each pair as one input: the first text, then the second.
  for (auto& [first, second] : pairs) {
    auto a = pooling_tokens(first, {}, std::nullopt);
    if (auto* r = std::get_if<io::HttpResponse>(&a)) return s->respond(std::move(*r));
    auto b = pooling_tokens(second, {}, std::nullopt);
    if (auto* r = std::get_if<io::HttpResponse>(&b)) return s->respond(std::move(*r));
    std::vector<kv::TokenId> both = std::move(std::get<std::vector<kv::TokenId>>(a));
    job->split.push_back(both.size());
    const auto& tail = std::get<std::vector<kv::TokenId>>(b);
    both.insert(both.end(), tail.begin(), tail.end());
    auto checked = pooling_tokens(std::nullopt, std::move(both), truncate);
    if (auto* r = std::get_if<io::HttpResponse>(&checked)) return s->respond(std::move(*r));
    job->tokens.push_back(std::move(std::get<std::vector<kv::TokenId>>(checked)));
    // Truncation cuts from the front: the first text may have lost tokens.
    const size_t cut = job->split.back() + tail.size() - job->tokens.back().size();
    job->split.back() = job->split.back() > cut ? job->split.back() - cut : 0;
  }
  job->scores.resize(job->tokens.size());
  start_pooling(std::move(job), std::move(s));
}

void EngineServer::Impl::start_pooling(std::shared_ptr<EmbeddingJob> job,
                                       std::shared_ptr<io::ResponseStream> s) {
  for (size_t i = 0; i < job->tokens.size(); ++i) job->ids.push_back(next_id.fetch_add(1));
  job->vectors.resize(job->ids.size());
  job->left = job->ids.size();
  job->stream = std::move(s);
  net::post(ioc, [this, job] {
    for (size_t i = 0; i < job->ids.size(); ++i) {
      auto sub = std::make_shared<Submission>();
      sub->request.id = job->ids[i];
      sub->request.prompt = job->tokens[i];  // kept: the embedding is computed from them
      sub->request.max_tokens = 1;           // the prefill computes the embedding
      sub->pending.stream = job->stream;
      sub->pending.embedding = job;
      sub->pending.embedding_index = i;
      sub->pending.ids.model = job->model;
      submit(std::move(sub));
    }
  });
}

void EngineServer::Impl::log_traceparent(const io::HttpRequest& req, std::string_view traceparent) {
  const uint64_t n = traced_requests.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::string id(req.header("x-request-id").value_or(""));
  const std::string state(req.header("tracestate").value_or(""));
  // One write per line: lines of concurrent requests do not interleave.
  const std::string line =
      fmt::format("kvgate engine: request {} {} id={} traceparent={}{}{}\n", n, req.path,
                  id.empty() ? "-" : id, traceparent, state.empty() ? "" : " tracestate=", state);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void EngineServer::Impl::handle_completion(const io::HttpRequest& req, openai::ApiKind kind,
                                           std::shared_ptr<io::ResponseStream> s,
                                           openai::Dialect dialect) {
  const bool anthropic = dialect == openai::Dialect::kAnthropic;
  auto error = [anthropic](int status, std::string_view message) {
    if (!anthropic) return vllm_error(status, message);
    return io::HttpResponse{
        status, "application/json", {}, openai::anthropic::error_json(status, message)};
  };
  if (!is_ready.load()) return s->respond(error(503, "engine is starting"));
  std::string chat_body;
  if (anthropic) {
    auto chat = openai::anthropic::messages_to_chat(req.body);
    if (!chat) return s->respond(error(kvgate::http_status(chat.code()), chat.error()));
    chat_body = std::move(*chat);
  }
  openai::responses::Answer answer;
  bool store = false;
  if (dialect == openai::Dialect::kResponses) {
    auto form = openai::responses::to_chat(req.body);
    if (!form) return s->respond(error(kvgate::http_status(form.code()), form.error()));
    openai::responses::ChatForm& f = *form;
    chat_body = std::move(f.chat);
    if (!f.previous_response_id.empty()) {
      // The conversation so far, as vLLM's response store gives it.
      std::optional<StoredResponse> previous = stored_response(f.previous_response_id);
      if (!previous) {
        return s->respond(
            error(404, "Response with id '" + f.previous_response_id + "' not found."));
      }
      chat_body = openai::responses::continue_chat(chat_body, f.has_instructions,
                                                   previous->messages, previous->output);
      answer.previous_response_id = std::move(f.previous_response_id);
    }
    store = f.store;
  }
  auto parsed = openai::parse_completion_request(
      dialect != openai::Dialect::kOpenAi ? std::string_view(chat_body) : req.body, kind);
  if (!parsed) {
    return s->respond(error(kvgate::http_status(parsed.code()), parsed.error()));
  }
  openai::CompletionRequest& c = *parsed;
  std::optional<Adapter> lora;
  if (!c.model.empty() && c.model != opt.served_model_name) {
    lora = adapter(c.model);
    if (!lora) return s->respond(error(404, "The model `" + c.model + "` does not exist."));
  }
  auto sub = std::make_shared<Submission>();
  engine::EngineRequest& r = sub->request;
  if (lora) {
    // The adapter's blocks are its own: its id and name seed their hashes (and go with
    // its KV events), as vLLM's do.
    r.lora_id = lora->id;
    r.lora_name = lora->name;
  }
  if (kind == openai::ApiKind::kChat) {
    auto tokens = codec->encode_chat(c.chat, c.add_special_tokens);
    if (!tokens) return s->respond(error(400, tokens.error()));
    r.prompt = std::move(*tokens);
  } else if (c.prompt_tokens) {
    r.prompt = std::move(*c.prompt_tokens);
  } else {
    auto tokens = codec->encode(*c.prompt_text, c.add_special_tokens);
    if (!tokens) return s->respond(error(400, tokens.error()));
    r.prompt = std::move(*tokens);
  }
  if (r.prompt.empty()) return s->respond(error(400, "the prompt is empty"));
  // Its blocks are its salt's own (vLLM's cache_salt), and their KV events say so.
  r.cache_salt = std::move(c.cache_salt);
  r.id = next_id.fetch_add(1);
  r.max_tokens = c.max_tokens.value_or(opt.default_max_tokens);
  r.priority = c.priority;
  // Temperature 0: the answer is a function of the prompt (and of nothing else), so a
  // request continued elsewhere from a prefix of its answer goes on identically.
  if (c.temperature && *c.temperature == 0) {
    r.output_tokens =
        engine::greedy_continuation(r.prompt, r.max_tokens, model.config().vocab_size);
  }
  Pending& p = sub->pending;
  if (c.return_token_ids) {
    p.return_token_ids = true;
    p.prompt_ids = r.prompt;
  }
  p.stream = std::move(s);
  p.kind = kind;
  p.dialect = dialect;
  if (dialect == openai::Dialect::kResponses) {
    p.answer = std::move(answer);
    p.answer.model = lora ? lora->name : opt.served_model_name;
    p.answer.created_at = clock.wall_now() / kSecond;
    p.answer.max_output_tokens = r.max_tokens;
    p.answer.incomplete = true;  // the engine's output length is exact: max_output_tokens
    p.store = store;
    if (store) p.messages = openai::responses::messages_of(chat_body);
  }
  p.streaming = c.stream;
  p.include_usage = c.stream && c.include_usage;
  p.ids.model = lora ? lora->name : opt.served_model_name;
  p.ids.created = clock.wall_now() / kSecond;
  if (c.kv_transfer) {
    const openai::KvTransferParams& kt = *c.kv_transfer;
    if (kt.do_remote_decode) {
      p.remote_decode = true;
      r.max_tokens = 1;  // the prefill half: the first token only
    } else if (kt.do_remote_prefill) {
      const uint64_t block = model.config().block_size;
      const uint64_t kv_tokens = r.prompt.size() / block * block;
      const bool same_rack = !opt.rack.empty() && kt.remote_rack && *kt.remote_rack == opt.rack;
      const double gbps = same_rack ? opt.nvlink_gbytes_per_s : opt.network_gbytes_per_s;
      const double seconds = opt.transfer_latency_ms / 1e3 +
                             static_cast<double>(kv_tokens * kv_bytes_per_token) / (gbps * 1e9);
      r.remote_kv = true;
      r.kv_transfer_time = kvgate::seconds(seconds);
    }
  }
  net::post(ioc, [this, sub] { submit(sub); });
}

void EngineServer::Impl::submit(std::shared_ptr<Submission> sub) {
  Pending& p = sub->pending;
  if (p.embedding && p.embedding->answered) return;  // another input failed
  if (opt.fail_rate > 0 && rng.uniform() < opt.fail_rate) {
    return refuse(p, vllm_error(500, "injected failure (--fail-rate)"));
  }
  if (sub->may_stall && opt.stall_ms > 0 && rng.uniform() < opt.stall_rate) {
    sub->may_stall = false;
    auto t = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(opt.stall_ms));
    t->async_wait([this, sub, t](const boost::system::error_code& ec) {
      if (!ec) submit(sub);
    });
    return;
  }
  if (p.stream->closed()) return;
  const RequestId id = sub->request.id;
  if (!p.embedding) {
    p.ids.id = (p.dialect == openai::Dialect::kAnthropic ? "msg_"
                : p.kind == openai::ApiKind::kChat       ? "chatcmpl-"
                                                         : "cmpl-") +
               random_hex(id_rng);
    if (p.dialect == openai::Dialect::kResponses) {
      p.answer.id = "resp_" + random_hex(id_rng);
      p.answer.item_id = "msg_" + random_hex(id_rng);
    }
  }
  Status added = model.add(std::move(sub->request), std::max(model_now(), last_end));
  if (!added) return refuse(p, vllm_error(400, added.error()));
  if (p.embedding) {
    // One close callback per stream (the last set wins): each aborts every input.
    p.stream->on_close([this, ids = p.embedding->ids] {
      net::post(ioc, [this, ids] {
        for (RequestId i : ids) abort_request(i);
      });
    });
  } else {
    p.stream->on_close([this, id] { net::post(ioc, [this, id] { abort_request(id); }); });
  }
  if (p.streaming) p.stream->start(200, "text/event-stream; charset=utf-8");
  pending.emplace(id, std::move(p));
  kick();
}

void EngineServer::Impl::abort_request(RequestId id) {
  if (pending.erase(id) > 0) model.abort(id);
}

void EngineServer::Impl::refuse(Pending& p, io::HttpResponse r) {
  if (p.embedding) {
    // An embedding answers once: the inputs still in the engine go.
    EmbeddingJob& job = *p.embedding;
    if (job.answered) return;
    job.answered = true;
    for (RequestId i : job.ids) abort_request(i);
  }
  if (p.dialect == openai::Dialect::kAnthropic) {
    r.body = openai::anthropic::error_from_openai(r.status, r.body);
  }
  p.stream->respond(std::move(r));
}

void EngineServer::Impl::embedding_done(Pending& p, const engine::RequestUpdate& u) {
  EmbeddingJob& job = *p.embedding;
  job.prompt_tokens += u.prompt_tokens;
  const size_t i = p.embedding_index;
  std::vector<kv::TokenId>& tokens = job.tokens[i];
  if (job.kind == EmbeddingJob::Kind::kEmbeddings) {
    job.vectors[i] = embedding_of(tokens, job.size);
  } else {
    const std::span<const kv::TokenId> all(tokens);
    job.scores[i] = relevance(all.first(job.split[i]), all.subspan(job.split[i]));
  }
  tokens = {};
  if (--job.left > 0 || job.answered) return;
  job.answered = true;
  std::string body;
  switch (job.kind) {
    case EmbeddingJob::Kind::kEmbeddings:
      body = render_embedding_response("embd-" + random_hex(id_rng), job.created, job.model,
                                       job.vectors, job.base64, job.prompt_tokens);
      break;
    case EmbeddingJob::Kind::kScore:
      body = render_score_response("score-" + random_hex(id_rng), job.created, job.model,
                                   job.scores, job.prompt_tokens);
      break;
    case EmbeddingJob::Kind::kRerank:
      body = render_rerank_response("rerank-" + random_hex(id_rng), job.model, job.documents,
                                    job.scores, job.top_n, job.prompt_tokens);
      break;
  }
  job.stream->respond(io::HttpResponse{200, "application/json", {}, std::move(body)});
}

void EngineServer::Impl::kick() {
  if (stepping) return;
  const Nanos now = std::max(model_now(), last_end);
  const std::optional<Nanos> next = model.next_step_time(now);
  const uint64_t gen = ++timer_gen;
  if (!next) return;  // idle until a request arrives
  if (*next > now) {
    step_timer.expires_at(wall_at(*next));
    step_timer.async_wait([this, gen](const boost::system::error_code& ec) {
      if (!ec && gen == timer_gen) kick();
    });
    return;
  }
  model.step(now, result);
  stepping = true;
  last_end = result.end();
  // A step that computed nothing (cannot happen with a consistent model) must not spin.
  const auto at = result.duration > 0 || !result.updates.empty()
                      ? wall_at(result.end())
                      : SteadyClock::now() + std::chrono::milliseconds(1);
  step_timer.expires_at(at);
  step_timer.async_wait([this, gen](const boost::system::error_code& ec) {
    if (ec || gen != timer_gen) return;
    on_step_end(gen);
  });
}

void EngineServer::Impl::on_step_end(uint64_t) {
  stepping = false;
  deliver();
  const engine::EngineMetrics& m = model.metrics();
  lb_waiting.store(m.waiting_gauge(), std::memory_order_relaxed);
  lb_running.store(m.num_requests_running, std::memory_order_relaxed);
  kick();
}

void EngineServer::Impl::deliver() {
  if (publisher && !result.kv_events.empty()) publish(result.kv_events);
  for (const engine::RequestUpdate& u : result.updates) deliver_update(u);
}

std::string EngineServer::Impl::kv_transfer_json(const engine::RequestUpdate& u) const {
  json::object kt;
  kt["do_remote_prefill"] = true;
  kt["do_remote_decode"] = false;
  json::array blocks;
  const uint32_t bs = model.config().block_size;
  for (uint32_t i = 0; i < (u.prompt_tokens + bs - 1) / bs; ++i) blocks.push_back(i);
  kt["remote_block_ids"] = std::move(blocks);
  kt["remote_engine_id"] = engine_id;
  kt["remote_host"] = opt.advertise_host.empty() ? opt.host : opt.advertise_host;
  kt["remote_port"] = http_port;
  kt["tp_size"] = 1;
  if (!opt.rack.empty()) kt["remote_rack"] = opt.rack;
  if (!opt.zone.empty()) kt["remote_zone"] = opt.zone;
  return json::serialize(kt);
}

void EngineServer::Impl::deliver_update(const engine::RequestUpdate& u) {
  auto it = pending.find(u.id);
  if (it == pending.end()) return;
  Pending& p = it->second;
  if (p.embedding) {
    embedding_done(p, u);  // one token: the request's last update
    pending.erase(it);
    return;
  }
  if (u.output_index == 0) {
    p.prompt_tokens = u.prompt_tokens;
    p.cached_tokens = u.cached_tokens;
  }
  ++p.produced;
  const std::string_view text = output_token_text(u.token);
  const bool last = u.finished;
  const openai::Usage usage{p.prompt_tokens, p.produced, p.cached_tokens};
  if (p.dialect == openai::Dialect::kResponses) {
    deliver_responses(p, u, usage);
    if (last) pending.erase(it);
    return;
  }
  if (p.dialect == openai::Dialect::kAnthropic) {
    // Every answer ends at max_tokens (the engine's output length is exact).
    if (p.streaming) {
      std::string out;
      if (u.output_index == 0) {
        out = openai::anthropic::render_stream_start(p.ids.id, p.ids.model, p.prompt_tokens);
      }
      out += openai::anthropic::render_text_delta(text);
      if (last) out += openai::anthropic::render_stream_end("max_tokens", usage);
      p.stream->write(std::move(out));
      if (last) p.stream->finish();
    } else {
      p.text += text;
      if (last) {
        p.stream->respond(io::HttpResponse{
            200,
            "application/json",
            {},
            openai::anthropic::render_message(p.ids.id, p.ids.model, p.text, "max_tokens", usage)});
      }
    }
    if (last) pending.erase(it);
    return;
  }
  if (p.streaming) {
    // return_token_ids: the prompt's ids in the first chunk, this token's id in its own.
    openai::TokenIdFields role_ids;
    const kv::TokenId token = u.token;
    openai::TokenIdFields token_ids{std::span(&token, 1), nullptr};
    if (p.return_token_ids && u.output_index == 0) {
      (p.kind == openai::ApiKind::kChat ? role_ids : token_ids).prompt = &p.prompt_ids;
    }
    if (p.kind == openai::ApiKind::kChat && !p.role_sent) {
      p.role_sent = true;
      p.stream->write(openai::render_chunk(p.kind, p.ids, "", true, "", p.include_usage,
                                           p.return_token_ids ? &role_ids : nullptr));
    }
    std::string out =
        openai::render_chunk(p.kind, p.ids, text, false, last ? "length" : "", p.include_usage,
                             p.return_token_ids ? &token_ids : nullptr);
    if (last) {
      if (p.include_usage) out += openai::render_usage_chunk(p.kind, p.ids, usage);
      out += openai::kSseDone;
      p.stream->write(std::move(out));
      p.stream->finish();
      pending.erase(it);
      return;
    }
    p.stream->write(std::move(out));
  } else {
    p.text += text;
    if (p.return_token_ids) p.output_ids.push_back(u.token);
    if (last) {
      const openai::TokenIdFields ids{p.output_ids, &p.prompt_ids};
      p.stream->respond(io::HttpResponse{
          200,
          "application/json",
          {},
          openai::render_response(p.kind, p.ids, p.text, "length", usage,
                                  p.remote_decode ? kv_transfer_json(u) : std::string(),
                                  p.return_token_ids ? &ids : nullptr)});
      pending.erase(it);
      return;
    }
  }
  if (opt.abort_after_tokens > 0 && p.produced >= opt.abort_after_tokens) {
    auto stream = std::move(p.stream);
    pending.erase(it);
    model.abort(u.id);
    stream->abort();
  }
}

void EngineServer::Impl::deliver_responses(Pending& p, const engine::RequestUpdate& u,
                                           const openai::Usage& usage) {
  const std::string_view text = output_token_text(u.token);
  p.text += text;
  // Stored before the answer leaves: a client that continues the conversation at once
  // (previous_response_id) must find it, whichever thread serves its next request.
  if (u.finished && p.store) {
    store_response(p.answer.id, {std::move(p.messages), p.text,
                                 openai::responses::render_response(p.answer, p.text, usage)});
  }
  if (p.streaming) {
    std::string out;
    if (u.output_index == 0) out = openai::responses::render_stream_start(p.answer, p.seq);
    out += openai::responses::render_text_delta(p.answer, text, p.seq);
    if (u.finished) out += openai::responses::render_stream_end(p.answer, p.text, usage, p.seq);
    p.stream->write(std::move(out));
    if (u.finished) p.stream->finish();
  } else if (u.finished) {
    p.stream->respond(io::HttpResponse{
        200, "application/json", {}, openai::responses::render_response(p.answer, p.text, usage)});
  }
}

void EngineServer::Impl::publish(const std::vector<kv::KvEvent>& events) {
  kv::EventBatch batch;
  batch.ts = to_seconds(clock.wall_now());
  batch.data_parallel_rank = rank;
  batch.events = events;  // the engine model speaks the wire's vocabulary
  publisher->publish(kv::encode_event_batch(batch, opt.kv_events_format));
}

void EngineServer::Impl::run_startup(std::vector<engine::StartupPhase> phases, size_t i, Nanos at) {
  if (i == phases.size()) return set_ready();
  const Nanos end = at + phases[i].duration;
  startup_timer.expires_at(wall_at(end));
  startup_timer.async_wait([this, phases = std::move(phases), i,
                            end](const boost::system::error_code& ec) mutable {
    if (ec) return;
    std::fprintf(stderr, "kvgate engine: startup phase %.*s done at %.1f s (simulated)\n",
                 static_cast<int>(phases[i].name.size()), phases[i].name.data(), to_seconds(end));
    engine::log_startup_phase_done(stdout, phases, i, opt.time_scale,
                                   {opt.served_model_name, static_cast<int>(::getpid())});
    run_startup(std::move(phases), i + 1, end);
  });
}

void EngineServer::Impl::set_ready() {
  {
    std::lock_guard lock(ready_mu);
    is_ready.store(true);
  }
  ready_cv.notify_all();
  if (opt.announce) {
    std::printf("kvgate engine ready\n");
    std::fflush(stdout);
  }
}

EngineServer::EngineServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EngineServer::~EngineServer() { stop(); }

Result<std::unique_ptr<EngineServer>> EngineServer::start(const EngineServerOptions& options,
                                                          engine::Profile profile,
                                                          std::unique_ptr<TextCodec> codec) {
  if (!(options.time_scale > 0)) return Error("--time-scale must be positive");
  if (options.fail_rate < 0 || options.fail_rate > 1) return Error("--fail-rate must be in [0, 1]");
  const uint32_t dp_size = options.data_parallel_size;
  if (dp_size == 0 || dp_size > route::kMaxDataParallelSize) {
    return Error(
        fmt::format("--data-parallel-size must be in [1, {}]", route::kMaxDataParallelSize));
  }
  if (dp_size > 1 && options.max_loras > 0) {
    return Error(
        "--data-parallel-size > 1 with --max-loras: LoRA is not simulated on "
        "data-parallel ranks");
  }
  const uint64_t kv_bytes = options.kv_bytes_per_token > 0 ? options.kv_bytes_per_token
                                                           : default_kv_bytes_per_token(profile);
  const std::shared_ptr<TextCodec> shared_codec = std::move(codec);
  // One engine core: its model, adapters and KV event publisher (no thread yet).
  auto make_rank = [&](const EngineServerOptions& o,
                       uint32_t rank) -> Result<std::unique_ptr<Impl>> {
    auto impl = std::make_unique<Impl>(o, profile, shared_codec);
    impl->rank = rank;
    impl->kv_bytes_per_token = kv_bytes;
    impl->engine_id = random_hex(impl->id_rng);
    // --lora-modules: loaded as POST /v1/load_lora_adapter loads, at the model's time 0
    // (served at once, as vLLM's static adapters are; the model's first steps wait for
    // their loads). More of them than slots: the later ones evict the earlier, which load
    // again on use.
    for (const auto& [name, path] : o.lora_modules) {
      Result<Nanos> loaded = impl->model.load_adapter(name, 0);
      if (!loaded) return Error("--lora-modules " + name + ": " + loaded.error());
      impl->add_adapter(name, path);
    }
    if (!o.kv_events_endpoint.empty()) {
      io::KvEventPublisherOptions po;
      po.endpoint = o.kv_events_endpoint;
      if (!o.replay_endpoint.empty()) po.replay_endpoint = o.replay_endpoint;
      po.topic = o.kv_events_topic;
      po.buffer_steps = o.kv_events_buffer_steps;
      po.drop_every = o.kv_events_drop_every;
      auto pub = io::KvEventPublisher::start(po);
      if (!pub)
        return Error(dp_size > 1 ? fmt::format("rank {}: {}", rank, pub.error()) : pub.error());
      impl->publisher = std::move(*pub);
    }
    return impl;
  };
  auto first = make_rank(options, 0);
  if (!first) return Error(first.error());
  std::unique_ptr<Impl> impl = std::move(*first);
  impl->ranks.push_back(impl.get());
  for (uint32_t r = 1; r < dp_size; ++r) {
    auto other = make_rank(rank_options(options, r), r);
    if (!other) return Error(other.error());
    (*other)->store = impl->store;
    impl->ranks.push_back(other->get());
    impl->other_ranks.push_back(std::move(*other));
  }
  io::HttpServerOptions ho;
  ho.address = options.host;
  ho.port = options.port;
  ho.threads = options.http_threads;
  ho.error_json = openai::vllm_error_json;
  Impl* raw = impl.get();
  auto http = io::HttpServer::start(
      ho, [raw](io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> s) {
        raw->handle(std::move(req), std::move(s));
      });
  if (!http) return Error(http.error());
  impl->http = std::move(*http);
  for (Impl* r : impl->ranks) r->http_port = impl->http->port();
  if (options.announce) {
    std::printf("kvgate engine listening on http://%s:%u\n", options.host.c_str(),
                static_cast<unsigned>(impl->http->port()));
    for (const Impl* r : impl->ranks) {
      if (!r->publisher) continue;
      // Rank 0's lines as without data parallelism; the others' name their rank.
      const std::string of_rank = r->rank == 0 ? "" : fmt::format(" of rank {}", r->rank);
      std::printf("kvgate engine kv events%s on %s\n", of_rank.c_str(),
                  r->publisher->endpoint().c_str());
      if (!r->publisher->replay_endpoint().empty()) {
        std::printf("kvgate engine kv replay%s on %s\n", of_rank.c_str(),
                    r->publisher->replay_endpoint().c_str());
      }
    }
    std::fflush(stdout);
  }
  for (Impl* r : impl->ranks) {
    r->work.emplace(r->ioc.get_executor());
    r->t0 = options.launched_at.value_or(SteadyClock::now());
    Rng startup_rng(r->opt.seed ^ 0x5eed5eed5eedull);
    auto phases = engine::sample_startup(*r->model.profile().startup, r->opt.startup, startup_rng);
    net::post(r->ioc, [r, phases = std::move(phases)]() mutable {
      r->run_startup(std::move(phases), 0, 0);
    });
    r->thread = std::thread([r] { r->ioc.run(); });
  }
  return std::unique_ptr<EngineServer>(new EngineServer(std::move(impl)));
}

uint16_t EngineServer::port() const { return impl_->http->port(); }
std::string EngineServer::kv_events_endpoint(uint32_t rank) const {
  if (rank >= impl_->ranks.size() || !impl_->ranks[rank]->publisher) return "";
  return impl_->ranks[rank]->publisher->endpoint();
}
std::string EngineServer::replay_endpoint(uint32_t rank) const {
  if (rank >= impl_->ranks.size() || !impl_->ranks[rank]->publisher) return "";
  return impl_->ranks[rank]->publisher->replay_endpoint();
}
bool EngineServer::ready() const {
  for (const Impl* r : impl_->ranks) {
    if (!r->is_ready.load()) return false;
  }
  return true;
}

bool EngineServer::wait_ready() const {
  // The other ranks have no startup phases: ready as soon as their threads run.
  for (Impl* r : impl_->ranks) {
    std::unique_lock lock(r->ready_mu);
    r->ready_cv.wait(lock, [r] { return r->is_ready.load() || r->stopped; });
    if (!r->is_ready.load()) return false;
  }
  return true;
}

void EngineServer::stop() {
  {
    std::lock_guard lock(impl_->ready_mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  impl_->http->stop(std::chrono::milliseconds(1000));
  // The HTTP server first: no request reaches a rank once its thread is gone.
  for (Impl* r : impl_->ranks) {
    if (r != impl_.get()) {
      std::lock_guard lock(r->ready_mu);
      r->stopped = true;
    }
    r->ready_cv.notify_all();
    r->work.reset();
    r->ioc.stop();
    if (r->thread.joinable()) r->thread.join();
    r->publisher.reset();
  }
}

}  // namespace kvgate::engine_server
