// GCC 12 reports a false -Wmismatched-new-delete on Asio coroutine frames (GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "gateway/control/admin_api.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "core/limit/auth_failure_limiter.h"
#include "gateway/control/admin_json.h"
#include "gateway/control/live_feed.h"
#include "gateway/control/ui_files.h"
#include "gateway/data/engine_tokenizer.h"
#include "gateway/data/keys.h"
#include "gateway/data/pool_runtime.h"
#include "io/ascii.h"
#include "io/http_server.h"
#include "openai/error.h"
#include "openai/request.h"

namespace kvgate::gateway {
namespace asio = boost::asio;
namespace json = boost::json;
using io::HttpRequest;
using io::HttpResponse;
using io::ResponseStream;

namespace {

constexpr std::chrono::milliseconds kDefaultDrainTimeout{30'000};
constexpr std::chrono::milliseconds kMaxDrainTimeout{3'600'000};
// Endpoint listings count the approximate index's blocks at most this often (a walk of
// the whole index, on the pool's strand).
constexpr Nanos kApproxCountsMaxAge = 2 * kSecond;

HttpResponse error(int status, std::string_view message, std::string_view code = {}) {
  return HttpResponse{
      status, "application/json", {}, openai::error_json(status, message, {}, code)};
}

HttpResponse ok(int status, const json::value& body) {
  return HttpResponse{status, "application/json", {}, json::serialize(body)};
}

// "/admin/pools/main/endpoints/3" -> {"pools", "main", "endpoints", "3"}.
std::vector<std::string> segments(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::optional<std::string_view> query_value(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

constexpr uint32_t kMaxAuthFailures = 10;
constexpr Nanos kAuthFailureWindow = 60 * kSecond;

// "10.0.0.7:51234" -> "10.0.0.7", "::1:51234" -> "::1": failures count per address.
std::string_view client_address(std::string_view remote) {
  const size_t colon = remote.rfind(':');
  return colon == std::string_view::npos ? remote : remote.substr(0, colon);
}

bool reserved(std::string_view name) {
  return name.empty() || name == "pools" || name == "endpoints" || name == "route" ||
         name == "policy" || name == "ui" || name == "recent" ||
         name.find('/') != std::string_view::npos;
}

// The password of a Basic credential ("Basic base64(user:password)"), which is how a
// browser sends what its login prompt was given; nullopt when it is not one.
std::optional<std::string> basic_password(std::string_view credentials) {
  if (credentials.empty() || credentials.size() % 4 != 0 || credentials.size() > 4096) {
    return std::nullopt;
  }
  std::string out(credentials.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(credentials.data()),
                                static_cast<int>(credentials.size()));
  if (n < 0) return std::nullopt;
  size_t pad = 0;
  for (size_t i = credentials.size(); i > 0 && credentials[i - 1] == '='; --i) ++pad;
  if (pad > 2) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);
  const size_t colon = out.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return out.substr(colon + 1);
}

// GET /admin/ui and its files (ui_files.h): the status page.
HttpResponse ui_file(const std::vector<std::string>& seg, std::string_view path) {
  const std::string_view name = seg.size() == 2 ? std::string_view("status.html") : seg[2];
  for (const EmbeddedFile& f : ui_files()) {
    if (seg.size() > 3 || f.name != name) continue;
    HttpResponse r{200, std::string(f.content_type), {}, std::string(f.body)};
    // Revalidated on every load (the binary may have been upgraded), kept by no shared
    // cache (the page sits behind the admin token); the page loads nothing from
    // elsewhere and is framed by nobody.
    r.headers.push_back({"Cache-Control", "no-cache, private"});
    r.headers.push_back({"X-Content-Type-Options", "nosniff"});
    r.headers.push_back({"Content-Security-Policy",
                         "default-src 'none'; script-src 'self'; style-src 'self'; "
                         "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                         "form-action 'none'; frame-ancestors 'none'"});
    r.headers.push_back({"Referrer-Policy", "no-referrer"});
    return r;
  }
  return error(404, fmt::format("Not found: {}", path));
}

// Listing parameters: ?offset=N&limit=N&health=NAME&history=1 (a page of the endpoints, in
// id order, of those with that health; with their TTFT and ITL history).
struct ListQuery {
  std::optional<route::EndpointId> only;  // one endpoint (GET .../endpoints/{id})
  size_t offset = 0;
  size_t limit = std::numeric_limits<size_t>::max();
  std::optional<route::Health> health;
  bool history = false;  // with each endpoint's TTFT and ITL history, and the pool's
};

Result<ListQuery> parse_list_query(std::string_view query) {
  ListQuery q;
  constexpr size_t kMaxCount = 1'000'000;
  for (const char* key : {"offset", "limit"}) {
    auto v = query_value(query, key);
    if (!v) continue;
    auto n = parse_number<size_t>(*v);
    if (!n || *n > kMaxCount) {
      return Error(
          fmt::format("{}: expected a whole number in [0, {}], got '{}'", key, kMaxCount, *v));
    }
    (std::string_view(key) == "offset" ? q.offset : q.limit) = *n;
  }
  if (auto h = query_value(query, "history")) q.history = *h == "1" || *h == "true";
  if (auto h = query_value(query, "health")) {
    for (route::Health x : {route::Health::kHealthy, route::Health::kUnhealthy,
                            route::Health::kDraining, route::Health::kStandby}) {
      if (route::to_string(x) == *h) q.health = x;
    }
    if (!q.health) {
      return Error(
          fmt::format("health: expected healthy, unhealthy, draining or standby, got '{}'", *h));
    }
  }
  return q;
}

}  // namespace

struct AdminApi::Impl : std::enable_shared_from_this<Impl> {
  AdminConfig config;
  const Clock* clock = nullptr;  // the gateway's (set by start): failed authentications
  asio::any_io_executor executor;
  std::vector<PoolHandle> pools;
  std::optional<KeyDigest> token;
  std::unique_ptr<io::HttpServer> server;
  std::mutex mu;  // guards the sections
  std::map<std::string, Section, std::less<>> sections;
  std::map<std::string, AsyncSection, std::less<>> async_sections;
  std::map<std::string, PoolSection, std::less<>> pool_sections;
  // Failed authentications per client address (a token guessed at most kMaxAuthFailures
  // times per kAuthFailureWindow from one address).
  std::mutex auth_mu;
  limit::AuthFailureLimiter auth_failures{
      {.max_failures = kMaxAuthFailures, .window = kAuthFailureWindow}};
  // Request ids for route views: never committed, kept apart from the data plane's.
  std::atomic<uint64_t> next_view_id{uint64_t{1} << 62};
  // Blocks per endpoint in each pool's approximate index (by index in `pools`), counted
  // by list() on the pool's strand, which alone touches its entry.
  struct ApproxCounts {
    Nanos at = -1;
    std::vector<size_t> counts;
  };
  std::vector<ApproxCounts> approx_counts;  // sized once by start()

  const PoolHandle* find_pool(std::string_view name) const {
    for (const PoolHandle& p : pools) {
      if (p.pool->name() == name) return &p;
    }
    return nullptr;
  }

  // `Authorization: Bearer TOKEN`, or `Basic base64(ANY-USER:TOKEN)` (what a browser
  // sends once its login prompt was given the token as password: the status page).
  bool authorized(const HttpRequest& req) const {
    if (!token) return true;
    const auto auth = req.header("authorization");
    if (!auth) return false;
    std::string_view v = *auth;
    constexpr std::string_view kBearer = "Bearer ";
    constexpr std::string_view kBasic = "Basic ";
    KeyDigest d{};
    if (io::istarts_with(v, kBearer)) {
      d = sha256(v.substr(kBearer.size()));
    } else if (io::istarts_with(v, kBasic)) {
      std::optional<std::string> password = basic_password(v.substr(kBasic.size()));
      if (!password) return false;
      d = sha256(*password);
    } else {
      return false;
    }
    // Digests have a fixed length: the comparison time does not depend on the token.
    return CRYPTO_memcmp(d.data(), token->data(), d.size()) == 0;
  }

  void handle(HttpRequest&& req, std::shared_ptr<ResponseStream> stream);
  // `self` keeps the Impl alive while the request is served.
  static asio::awaitable<void> serve(std::shared_ptr<Impl> self, HttpRequest req,
                                     std::shared_ptr<ResponseStream> stream);
  asio::awaitable<HttpResponse> dispatch(const HttpRequest& req);
  asio::awaitable<HttpResponse> pool_route(const HttpRequest& req, const PoolHandle& pool,
                                           const std::vector<std::string>& seg);
  // A page of a pool's endpoints (q), and the whole pool's summary.
  struct Listing {
    std::vector<EndpointSnapshot> endpoints;
    PoolSummary summary;
    size_t matched = 0;  // endpoints that pass q's filter, before paging
  };
  asio::awaitable<Listing> list(const PoolHandle& pool, const ListQuery& q);
  asio::awaitable<std::vector<EndpointSnapshot>> snapshot(const PoolHandle& pool,
                                                          std::optional<route::EndpointId> only);
  asio::awaitable<json::object> pool_json(const PoolHandle& pool);
  asio::awaitable<HttpResponse> route_view(const HttpRequest& req, const PoolHandle& pool);
  // The router's view of a recent request (RecentRequests), as the pool is now.
  asio::awaitable<HttpResponse> recent_view(const json::value& id, const PoolHandle& pool);
  // The explanation of `rr` on the pool's strand, as route_view renders it.
  asio::awaitable<json::object> explain(const PoolHandle& pool, route::RouteRequest& rr);
  asio::awaitable<HttpResponse> policy(const HttpRequest& req, const PoolHandle& pool);
  asio::awaitable<HttpResponse> recent(const PoolHandle& pool);
};

void AdminApi::Impl::handle(HttpRequest&& req, std::shared_ptr<ResponseStream> stream) {
  if (token) {
    const std::string_view client = client_address(req.remote);
    const Nanos now = clock->now();
    std::optional<Nanos> wait;
    {
      std::lock_guard lock(auth_mu);
      wait = auth_failures.locked_out(client, now);
    }
    if (wait) {
      // Not checked at all: a right token is refused as a wrong one would be.
      HttpResponse r = error(429,
                             fmt::format("Too many failed admin authentications from {}; retry "
                                         "in {} s",
                                         client, (*wait + kSecond - 1) / kSecond),
                             "too_many_failed_authentications");
      r.headers.push_back({"Retry-After", std::to_string((*wait + kSecond - 1) / kSecond)});
      return stream->respond(std::move(r));
    }
    if (!authorized(req)) {
      // The status page is asked for without credentials first (a browser sends its
      // login prompt's answer only after a challenge): that is no guess, and must not
      // count towards a lockout.
      const bool page = req.path == "/admin/ui" || req.path.starts_with("/admin/ui/");
      const bool guess = !page || req.header("authorization").has_value();
      bool locked = false;
      if (guess) {
        std::lock_guard lock(auth_mu);
        locked = auth_failures.failed(client, now);
      }
      if (locked) {
        spdlog::warn(
            "admin: {} failed authentications from {} within {} s: its requests are refused "
            "until that time is over",
            kMaxAuthFailures, client, kAuthFailureWindow / kSecond);
      }
      HttpResponse r = error(401, "Invalid or missing admin token", "invalid_admin_token");
      // The page's challenge opens the browser's login prompt (any user name, the admin
      // token as password); the API's asks for the bearer token.
      r.headers.push_back({"WWW-Authenticate",
                           page ? "Basic realm=\"kvgate admin\", charset=\"UTF-8\"" : "Bearer"});
      return stream->respond(std::move(r));
    }
  }
  // The work runs on the gateway's executor (the pools' strands live there).
  asio::co_spawn(executor, serve(shared_from_this(), std::move(req), std::move(stream)),
                 asio::detached);
}

asio::awaitable<void> AdminApi::Impl::serve(std::shared_ptr<Impl> self, HttpRequest req,
                                            std::shared_ptr<ResponseStream> stream) {
  HttpResponse r;
  try {
    r = co_await self->dispatch(req);
  } catch (const std::exception& e) {
    // Bugs only (bad input is answered with 4xx); never take the gateway down for them.
    spdlog::error("admin: {} {}: {}", req.method, req.path, e.what());
    r = error(500, fmt::format("Internal error: {}", e.what()));
  }
  stream->respond(std::move(r));
}

asio::awaitable<HttpResponse> AdminApi::Impl::dispatch(const HttpRequest& req) {
  std::vector<std::string> seg = segments(req.path);
  if (seg.empty() || seg[0] != "admin") {
    co_return error(404, fmt::format("Not found: {} {}", req.method, req.path));
  }
  const bool get = req.method == "GET" || req.method == "HEAD";
  if (seg.size() == 1) {
    if (!get)
      co_return error(405, fmt::format("Method {} not allowed on {}", req.method, req.path));
    json::array names;
    for (const PoolHandle& p : pools) names.push_back(json::value(p.pool->name()));
    json::array secs, pool_secs;
    std::map<std::string, PoolSection, std::less<>> registered;
    {
      std::lock_guard lock(mu);
      for (const auto& [name, fn] : sections) secs.push_back(json::value(name));
      for (const auto& [name, fn] : async_sections) secs.push_back(json::value(name));
      for (const auto& [name, fn] : pool_sections) pool_secs.push_back(json::value(name));
      registered = pool_sections;
    }
    // Which pool sections have something for each pool (the status page asks only
    // those, never for a 404).
    json::object by_pool;
    for (const PoolHandle& p : pools) {
      json::array has;
      for (const auto& [name, fn] : registered) {
        if (fn(p.pool->name())) has.push_back(json::value(name));
      }
      by_pool[p.pool->name()] = std::move(has);
    }
    co_return ok(200, json::object{{"pools", std::move(names)},
                                   {"sections", std::move(secs)},
                                   {"pool_sections", std::move(pool_secs)},
                                   {"pool_sections_by_pool", std::move(by_pool)}});
  }
  if (seg[1] == "ui") {
    if (!get)
      co_return error(405, fmt::format("Method {} not allowed on {}", req.method, req.path));
    co_return ui_file(seg, req.path);
  }
  if (seg[1] != "pools") {
    if (seg.size() != 2) co_return error(404, fmt::format("Not found: {}", req.path));
    Section fn;
    AsyncSection async_fn;
    {
      std::lock_guard lock(mu);
      auto it = sections.find(seg[1]);
      if (it != sections.end()) fn = it->second;
      auto a = async_sections.find(seg[1]);
      if (a != async_sections.end()) async_fn = a->second;
    }
    if (!fn && !async_fn) co_return error(404, fmt::format("Not found: {}", req.path));
    if (!get)
      co_return error(405, fmt::format("Method {} not allowed on {}", req.method, req.path));
    if (async_fn) co_return ok(200, co_await async_fn());
    co_return ok(200, fn());
  }
  if (seg.size() == 2) {
    if (!get)
      co_return error(405, fmt::format("Method {} not allowed on {}", req.method, req.path));
    json::array out;
    for (const PoolHandle& p : pools) out.push_back(co_await pool_json(p));
    co_return ok(200, json::object{{"pools", std::move(out)}});
  }
  const PoolHandle* pool = find_pool(seg[2]);
  if (!pool) co_return error(404, fmt::format("No pool named '{}'", seg[2]), "pool_not_found");
  co_return co_await pool_route(req, *pool, seg);
}

asio::awaitable<HttpResponse> AdminApi::Impl::pool_route(const HttpRequest& req,
                                                         const PoolHandle& pool,
                                                         const std::vector<std::string>& seg) {
  const bool get = req.method == "GET" || req.method == "HEAD";
  auto not_allowed = [&] {
    return error(405, fmt::format("Method {} not allowed on {}", req.method, req.path));
  };
  PoolRuntime& rt = *pool.pool;
  if (seg.size() == 3) {
    if (!get) co_return not_allowed();
    co_return ok(200, co_await pool_json(pool));
  }
  const std::string& what = seg[3];
  if (what == "endpoints" && seg.size() == 4) {
    if (get) {
      auto q = parse_list_query(req.query);
      if (!q) co_return error(400, q.error());
      Listing l = co_await list(pool, *q);
      json::array out;
      const Nanos now = rt.clock().now();
      for (const EndpointSnapshot& s : l.endpoints) out.push_back(endpoint_json(s, now));
      json::object body{{"pool", rt.name()},
                        {"total", l.matched},
                        {"offset", q->offset},
                        {"summary", summary_json(l.summary)},
                        {"endpoints", std::move(out)}};
      if (q->history && pool.feed) {
        LiveFeed::LatencyHistory h = pool.feed->pool_latency_history();
        json::object o = latency_history_json({.ttft = std::move(h.ttft), .itl = std::move(h.itl)});
        o["step_s"] = LiveFeed::kHistoryStep / kSecond;
        body["history"] = std::move(o);
      }
      co_return ok(200, body);
    }
    if (req.method != "POST") co_return not_allowed();
    auto add = parse_add_endpoint(req.body, !rt.config().kv_events_bind.empty());
    if (!add) co_return error(400, add.error(), "invalid_endpoint");
    for (const EndpointAddress& e : rt.endpoints()) {
      if (e.url == add->spec.url) {
        co_return error(
            409, fmt::format("Endpoint {} is already in pool {} (id {})", e.url, rt.name(), e.id),
            "endpoint_exists");
      }
    }
    const std::string url = add->spec.url;
    auto id = co_await rt.add_endpoint(std::move(add->spec), std::move(add->kv_events), "admin");
    if (!id) co_return error(400, id.error(), "invalid_endpoint");
    spdlog::info("admin: pool {}: added endpoint {} ({})", rt.name(), *id, url);
    co_return ok(201, json::object{{"id", *id}, {"url", url}, {"pool", rt.name()}});
  }
  if (what == "endpoints" && seg.size() == 5) {
    auto id = parse_number<route::EndpointId>(seg[4]);
    std::optional<EndpointAddress> address;
    if (id) address = rt.endpoint(*id);
    if (!address) {
      co_return error(404, fmt::format("No endpoint {} in pool {}", seg[4], rt.name()),
                      "endpoint_not_found");
    }
    if (get) {
      auto snap = co_await snapshot(pool, *id);
      if (snap.empty()) {
        co_return error(404, fmt::format("No endpoint {} in pool {}", seg[4], rt.name()),
                        "endpoint_not_found");
      }
      co_return ok(200, endpoint_json(snap[0], rt.clock().now()));
    }
    if (req.method != "DELETE") co_return not_allowed();
    std::chrono::milliseconds timeout = kDefaultDrainTimeout;
    if (auto t = query_value(req.query, "timeout_ms")) {
      auto v = parse_number<int64_t>(*t);
      if (!v || *v < 0 || *v > kMaxDrainTimeout.count()) {
        co_return error(400, fmt::format("timeout_ms: expected a whole number of milliseconds "
                                         "in [0, {}], got '{}'",
                                         kMaxDrainTimeout.count(), *t));
      }
      timeout = std::chrono::milliseconds(*v);
    }
    auto drained = co_await rt.remove_endpoint(*id, timeout);
    if (!drained) co_return error(404, drained.error(), "endpoint_not_found");
    spdlog::info("admin: pool {}: removed endpoint {} ({}), drained {}", rt.name(), *id,
                 address->url, *drained);
    co_return ok(
        200,
        json::object{{"id", *id}, {"url", address->url}, {"removed", true}, {"drained", *drained}});
  }
  if (seg.size() != 4) co_return error(404, fmt::format("Not found: {}", req.path));
  if (what == "route") {
    if (req.method != "POST") co_return not_allowed();
    co_return co_await route_view(req, pool);
  }
  if (what == "policy") co_return co_await policy(req, pool);
  if (what == "recent") {
    if (!get) co_return not_allowed();
    co_return co_await recent(pool);
  }
  PoolSection fn;
  {
    std::lock_guard lock(mu);
    auto it = pool_sections.find(what);
    if (it != pool_sections.end()) fn = it->second;
  }
  if (!fn) co_return error(404, fmt::format("Not found: {}", req.path));
  if (!get) co_return not_allowed();
  std::optional<json::value> body = fn(rt.name());
  if (!body) co_return error(404, fmt::format("Nothing at {} for pool {}", what, rt.name()));
  co_return ok(200, *body);
}

asio::awaitable<AdminApi::Impl::Listing> AdminApi::Impl::list(const PoolHandle& pool,
                                                              const ListQuery& q) {
  Listing out;
  PoolRuntime& rt = *pool.pool;
  ApproxCounts& approx = approx_counts[static_cast<size_t>(&pool - pools.data())];
  co_await rt.with_router([&](route::Router& r) {
    const Nanos now = rt.clock().now();
    // Walking the approximate index costs in proportion to its size: counted at most once
    // per kApproxCountsMaxAge (on this strand, which alone touches `approx`).
    if (kv::ApproxIndex* a = r.indexes().approx;
        a && (approx.at < 0 || now - approx.at >= kApproxCountsMaxAge || now < approx.at)) {
      a->blocks_held(now, approx.counts);
      approx.at = now;
    }
    kv::PreciseIndex* precise = r.indexes().precise;
    size_t matched = 0;
    for (route::EndpointId id : r.pool().ids()) {
      if (q.only && id != *q.only) continue;
      const route::Endpoint* e = r.pool().get(id);
      const route::CircuitBreakers::State b = rt.breaker_state(id);
      const size_t precise_blocks = precise ? precise->blocks_held(id) : 0;
      const size_t approx_blocks = id < approx.counts.size() ? approx.counts[id] : 0;
      out.summary.add(*e, b.open(), precise_blocks, approx_blocks);
      if (q.health && e->health != *q.health) continue;
      const size_t index = matched++;
      if (index < q.offset || index - q.offset >= q.limit) continue;
      EndpointSnapshot s;
      s.endpoint = *e;
      s.effective = route::effective_load(*e, now, r.config().saturation);
      s.breaker = {.open = b.open(),
                   .consecutive_failures = static_cast<int>(b.consecutive_failures),
                   .open_for = b.open_until > 0 ? std::max<Nanos>(0, b.open_until - now) : 0};
      if (precise) {
        s.precise_blocks = precise_blocks;
        s.index_events = precise->stats(id);
      }
      s.approx_blocks = approx_blocks;
      out.endpoints.push_back(std::move(s));
    }
    out.matched = matched;
  });
  for (EndpointSnapshot& s : out.endpoints) {
    if (auto address = rt.endpoint(s.endpoint.id)) s.origin = address->origin;
  }
  if (pool.feed) {
    for (EndpointSnapshot& s : out.endpoints) {
      auto events = pool.feed->endpoint_events(s.endpoint.id);
      auto address = rt.endpoint(s.endpoint.id);
      if (!events || !address || !address->kv_events) continue;
      s.kv_events = EventFeedView{
          .source = *address->kv_events, .events = events->events, .resyncs = events->resyncs};
    }
    if (q.history) {
      for (EndpointSnapshot& s : out.endpoints) {
        if (auto h = pool.feed->latency_history(s.endpoint.id)) {
          s.history = LatencyHistoryView{.ttft = std::move(h->ttft), .itl = std::move(h->itl)};
        }
      }
    }
  }
  co_return out;
}

asio::awaitable<std::vector<EndpointSnapshot>> AdminApi::Impl::snapshot(
    const PoolHandle& pool, std::optional<route::EndpointId> only) {
  co_return (co_await list(pool, ListQuery{.only = only})).endpoints;
}

asio::awaitable<json::object> AdminApi::Impl::pool_json(const PoolHandle& pool) {
  json::array endpoints;
  for (const EndpointSnapshot& s : co_await snapshot(pool, std::nullopt)) {
    endpoints.push_back(endpoint_json(s, pool.pool->clock().now()));
  }
  std::string policy;
  co_await pool.pool->with_router([&](route::Router& r) { policy = r.config().policy.name; });
  co_return json::object{{"name", pool.pool->name()},
                         {"policy", policy},
                         {"block_size", pool.pool->config().router.block_size},
                         {"endpoints", std::move(endpoints)}};
}

asio::awaitable<HttpResponse> AdminApi::Impl::route_view(const HttpRequest& req,
                                                         const PoolHandle& pool) {
  boost::system::error_code ec;
  json::value body = json::parse(req.body, ec);
  if (ec || !body.is_object()) {
    co_return error(400, "The body must be an OpenAI chat or completion request (JSON object)");
  }
  json::object& o = body.as_object();
  if (const json::value* id = o.if_contains("recent_id")) co_return co_await recent_view(*id, pool);
  const openai::ApiKind kind =
      o.contains("messages") ? openai::ApiKind::kChat : openai::ApiKind::kCompletion;
  // The pool is in the path: `model` is optional here. When it names one of the pool's
  // adapters (or an alias of one), the view routes as that adapter's requests do: its
  // blocks seeded with its name, the LoRA tiers and the placement (route/router.h).
  if (!o.contains("model")) o["model"] = pool.pool->name();
  const ModelConfig* adapter = nullptr;
  if (const json::value* m = o.if_contains("model"); m && m->is_string()) {
    const json::string& given = m->as_string();
    const std::string_view name(given.data(), given.size());
    for (const ModelConfig& a : pool.adapters) {
      if (a.name == name || std::find(a.aliases.begin(), a.aliases.end(), name) != a.aliases.end())
        adapter = &a;
    }
  }
  const std::string_view adapter_name = adapter ? std::string_view(adapter->name) : "";
  const std::string text = json::serialize(o);
  openai::Inspection in = openai::inspect_request(text, kind);
  if (in.error) {
    const int status = kvgate::http_status(in.error->code);
    co_return HttpResponse{status,
                           "application/json",
                           {},
                           openai::error_json(status, in.error->message, in.error->field)};
  }
  std::vector<kv::BlockKey> keys;
  uint32_t prompt_tokens = 0;
  std::string_view tokenize_result;  // the engine fallback's, for its pools
  if (EngineTokenizer* et = pool.pool->engine_tokenizer(); et && et->covers(kind)) {
    // As a request of this pool gets its ids: cached, or asked of an engine (counted in
    // kvgate_engine_tokenize_total like a request's) under the body's model name.
    const std::string_view served =
        adapter ? std::string_view(adapter->served_name) : std::string_view(in.request.model);
    EngineTokenizer::Ids got = co_await et->ids_for(in.request, text, kind, served);
    pool.pool->keys_of(got.ids, keys, adapter_name, in.request.cache_salt);
    prompt_tokens = static_cast<uint32_t>(got.ids.size());
    tokenize_result = got.result;
    // A follow-up's whole ids are not fetched for a view (the view records nothing).
  } else {
    pool.pool->keys_for(in.request, text, kind, adapter_name, keys, prompt_tokens);
  }
  route::RouteRequest rr;
  rr.keys = keys;
  rr.prompt_tokens = prompt_tokens;
  rr.expected_output_tokens = in.request.max_tokens;
  rr.adapter = adapter_name;
  json::object out = co_await explain(pool, rr);
  out["kind"] = kind == openai::ApiKind::kChat ? "chat" : "completion";
  // The adapter routed as (null: the base model); a salt's presence, not its value.
  if (adapter) {
    out["adapter"] = adapter->name;
  } else {
    out["adapter"] = nullptr;
  }
  out["cache_salt"] = !in.request.cache_salt.empty();
  if (!tokenize_result.empty()) out["engine_tokenize"] = tokenize_result;
  co_return ok(200, out);
}

asio::awaitable<json::object> AdminApi::Impl::explain(const PoolHandle& pool,
                                                      route::RouteRequest& rr) {
  rr.id = next_view_id.fetch_add(1);
  json::object out;
  co_await pool.pool->with_router([&](route::Router& r) {
    Rng rng(static_cast<uint64_t>(pool.pool->clock().now()));
    route::Explanation x = r.explain(rr, pool.pool->clock().now(), rng);
    auto url_of = [&](route::EndpointId id) {
      const route::Endpoint* e = r.pool().get(id);
      return e ? e->spec.url : std::string();
    };
    auto health_of = [&](route::EndpointId id) {
      const route::Endpoint* e = r.pool().get(id);
      return e ? e->health : route::Health::kUnhealthy;
    };
    out = explanation_json(x, rr.prompt_tokens, r.config(), url_of, health_of);
  });
  co_return out;
}

asio::awaitable<HttpResponse> AdminApi::Impl::recent_view(const json::value& id,
                                                          const PoolHandle& pool) {
  if (!id.is_uint64() && !(id.is_int64() && id.as_int64() >= 0)) {
    co_return error(400, "recent_id: expected a request id from GET .../recent");
  }
  const route::RequestId want =
      id.is_uint64() ? id.as_uint64() : static_cast<route::RequestId>(id.as_int64());
  PoolRuntime& rt = *pool.pool;
  std::optional<RecentRequests::Entry> entry;
  std::string url;
  co_await rt.with_router([&](route::Router& r) {
    if (const RecentRequests::Entry* e = rt.recent().find(want)) {
      entry = *e;
      if (const route::Endpoint* ep = r.pool().get(e->decision.endpoint)) url = ep->spec.url;
    }
  });
  if (!entry) {
    co_return error(404, fmt::format("No recent request {} in pool {}", want, rt.name()),
                    "request_not_found");
  }
  route::RouteRequest rr;
  rr.keys = entry->keys;
  rr.prompt_tokens = entry->prompt_tokens;
  rr.expected_output_tokens = entry->expected_output_tokens;
  json::object out = co_await explain(pool, rr);
  json::object was{{"id", entry->id},
                   {"age_s", to_seconds(rt.clock().now() - entry->at)},
                   {"accepted", entry->decision.accepted()},
                   {"reason", std::string(route::to_string(entry->decision.reason))},
                   {"matched_blocks", entry->decision.matched_blocks}};
  if (entry->decision.accepted()) {
    was["endpoint"] = entry->decision.endpoint;
    was["url"] = url;
  }
  out["recent"] = std::move(was);
  co_return ok(200, out);
}

asio::awaitable<HttpResponse> AdminApi::Impl::recent(const PoolHandle& pool) {
  PoolRuntime& rt = *pool.pool;
  const Nanos now = rt.clock().now();
  // Someone looks: the pool records its decisions for the next minute.
  rt.recent().watch(now);
  json::array out;
  co_await rt.with_router([&](route::Router& r) {
    const auto& entries = rt.recent().entries();
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      json::object o{{"id", it->id},
                     {"age_s", std::round(to_seconds(now - it->at) * 10) / 10},
                     {"prompt_tokens", it->prompt_tokens},
                     {"prompt_blocks", it->keys.size()},
                     {"accepted", it->decision.accepted()},
                     {"reason", std::string(route::to_string(it->decision.reason))},
                     {"matched_blocks", it->decision.matched_blocks}};
      if (it->decision.accepted()) {
        const route::Endpoint* e = r.pool().get(it->decision.endpoint);
        o["endpoint"] = it->decision.endpoint;
        o["url"] = e ? e->spec.url : std::string();
      }
      out.push_back(std::move(o));
    }
  });
  co_return ok(200, json::object{{"pool", rt.name()},
                                 {"watching_s", RecentRequests::kWatchFor / kSecond},
                                 {"requests", std::move(out)}});
}

asio::awaitable<HttpResponse> AdminApi::Impl::policy(const HttpRequest& req,
                                                     const PoolHandle& pool) {
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool put = req.method == "PUT";
  if (!get && !put && req.method != "PATCH") {
    co_return error(405, fmt::format("Method {} not allowed on {}", req.method, req.path));
  }
  json::object out;
  std::string failure;
  co_await pool.pool->with_router([&](route::Router& r) {
    if (!get) {
      auto next = apply_policy_body(r.config(), req.body, put);
      if (!next) {
        failure = next.error();
        return;
      }
      if (Status s = r.reconfigure(std::move(*next)); !s) {
        failure = s.error();
        return;
      }
    }
    out = router_config_json(r.config());
  });
  if (!failure.empty()) co_return error(400, failure, "invalid_policy");
  if (!get) {
    spdlog::info("admin: pool {}: routing parameters changed: {}", pool.pool->name(),
                 json::serialize(out));
  }
  co_return ok(200, out);
}

AdminApi::AdminApi(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminApi::~AdminApi() { stop(); }

Result<std::unique_ptr<AdminApi>> AdminApi::start(const AdminConfig& config,
                                                  asio::any_io_executor executor,
                                                  std::vector<PoolHandle> pools,
                                                  const Clock& clock) {
  auto impl = std::make_shared<Impl>();
  impl->config = config;
  impl->clock = &clock;
  impl->executor = std::move(executor);
  impl->pools = std::move(pools);
  impl->approx_counts.resize(impl->pools.size());
  if (!config.token.empty()) impl->token = sha256(config.token);
  io::HttpServerOptions opts;
  opts.address = config.address;
  opts.port = config.port;
  opts.threads = 1;
  opts.max_body_bytes = 8 * 1024 * 1024;  // a route view may carry a long prompt
  opts.error_json = openai::vllm_error_json;
  std::weak_ptr<Impl> weak = impl;
  auto server = io::HttpServer::start(
      opts, [weak](HttpRequest&& req, std::shared_ptr<ResponseStream> stream) {
        if (auto self = weak.lock()) {
          self->handle(std::move(req), std::move(stream));
        } else {
          stream->respond(error(503, "The admin API is shutting down"));
        }
      });
  if (!server) {
    return Error(
        fmt::format("admin listener {}:{}: {}", config.address, config.port, server.error()));
  }
  impl->server = std::move(*server);
  return std::unique_ptr<AdminApi>(new AdminApi(std::move(impl)));
}

uint16_t AdminApi::port() const { return impl_->server ? impl_->server->port() : 0; }

void AdminApi::stop() {
  if (impl_->server) impl_->server->stop(std::chrono::milliseconds(1000));
}

bool AdminApi::add_section(std::string name, Section fn) {
  if (reserved(name) || !fn) return false;
  std::lock_guard lock(impl_->mu);
  impl_->async_sections.erase(name);
  impl_->sections[std::move(name)] = std::move(fn);
  return true;
}

bool AdminApi::add_async_section(std::string name, AsyncSection fn) {
  if (reserved(name) || !fn) return false;
  std::lock_guard lock(impl_->mu);
  impl_->sections.erase(name);
  impl_->async_sections[std::move(name)] = std::move(fn);
  return true;
}

bool AdminApi::add_pool_section(std::string name, PoolSection fn) {
  if (reserved(name) || !fn) return false;
  std::lock_guard lock(impl_->mu);
  impl_->pool_sections[std::move(name)] = std::move(fn);
  return true;
}

}  // namespace kvgate::gateway
