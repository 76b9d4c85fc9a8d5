// The admin API's JSON pieces: endpoint state, add-endpoint bodies, policy GET/PATCH/PUT
// bodies and the route view.
#include "gateway/control/admin_json.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace kvgate::gateway {
namespace {
namespace json = boost::json;

json::value parse(const json::object& o) { return json::parse(json::serialize(o)); }

TEST(AdminJson, EndpointStateWithMetricsLoadCacheAndEvents) {
  EndpointSnapshot s;
  s.endpoint.id = 3;
  s.endpoint.spec = {.url = "http://10.0.0.7:8000",
                     .role = Role::kDecode,
                     .zone = "z1",
                     .rack = "r4",
                     .labels = {{"gpu", "h100"}},
                     .kv_capacity_blocks = 4000};
  s.endpoint.health = route::Health::kDraining;
  s.endpoint.metrics = route::ScrapedMetrics{
      .waiting = 2, .running = 7, .kv_usage = 0.25, .scraped_at = 1 * kSecond};
  s.endpoint.load.in_flight = 4;
  s.endpoint.load.active_decode_blocks = 120;
  s.effective.waiting = 3;
  s.effective.saturation = 0.6;
  s.breaker = {.open = true, .consecutive_failures = 5, .open_for = 2 * kSecond};
  s.precise_blocks = 96;
  s.approx_blocks = 12;
  s.index_events.stored_blocks = 100;
  s.index_events.removed_blocks = 4;
  s.index_events.unknown_parent = 1;
  EventFeedView feed;
  feed.source = {.publisher = "tcp://10.0.0.7:5557", .replay = "tcp://10.0.0.7:5558"};
  feed.events.batches = 40;
  feed.events.gaps = 2;
  feed.events.replays = 1;
  feed.events.next_sequence = 41;
  feed.resyncs = 1;
  s.kv_events = feed;
  s.origin = "discovery:dns";

  json::value v = parse(endpoint_json(s, 1500 * kMillisecond));
  const json::object& o = v.as_object();
  EXPECT_EQ(o.at("id").as_int64(), 3);
  EXPECT_EQ(o.at("url").as_string(), "http://10.0.0.7:8000");
  EXPECT_EQ(o.at("role").as_string(), "decode");
  EXPECT_EQ(o.at("zone").as_string(), "z1");
  EXPECT_EQ(o.at("rack").as_string(), "r4");
  EXPECT_EQ(o.at("labels").at("gpu").as_string(), "h100");
  EXPECT_EQ(o.at("health").as_string(), "draining");
  EXPECT_EQ(o.at("source").as_string(), "discovery:dns");
  EXPECT_EQ(o.at("breaker").at("state").as_string(), "open");
  EXPECT_EQ(o.at("breaker").at("consecutive_failures").as_int64(), 5);
  EXPECT_DOUBLE_EQ(o.at("breaker").at("open_for_ms").to_number<double>(), 2000);
  EXPECT_EQ(o.at("metrics").at("waiting").as_int64(), 2);
  EXPECT_EQ(o.at("metrics").at("running").as_int64(), 7);
  EXPECT_DOUBLE_EQ(o.at("metrics").at("kv_usage").to_number<double>(), 0.25);
  EXPECT_DOUBLE_EQ(o.at("metrics").at("age_ms").to_number<double>(), 500);
  EXPECT_EQ(o.at("load").at("in_flight").as_int64(), 4);
  EXPECT_EQ(o.at("load").at("active_decode_blocks").as_int64(), 120);
  EXPECT_DOUBLE_EQ(o.at("effective_load").at("waiting").to_number<double>(), 3);
  EXPECT_FALSE(o.at("effective_load").at("saturated").as_bool());
  EXPECT_EQ(o.at("cache").at("precise_blocks").as_int64(), 96);
  EXPECT_EQ(o.at("cache").at("approx_blocks").as_int64(), 12);
  EXPECT_EQ(o.at("cache").at("anomalies").as_int64(), 1);
  const json::object& ev = o.at("kv_events").as_object();
  EXPECT_EQ(ev.at("publisher").as_string(), "tcp://10.0.0.7:5557");
  EXPECT_EQ(ev.at("batches").as_int64(), 40);
  EXPECT_EQ(ev.at("next_sequence").as_int64(), 41);
  EXPECT_EQ(ev.at("gaps").as_int64(), 2);
  EXPECT_EQ(ev.at("replays").as_int64(), 1);
  EXPECT_EQ(ev.at("resyncs").as_int64(), 1);
}

TEST(AdminJson, NeverScrapedAndStaleEndpointRendersNulls) {
  EndpointSnapshot s;
  s.endpoint.spec.url = "http://a:1";
  s.effective.stale = true;
  s.effective.saturation = std::numeric_limits<double>::infinity();
  json::value v = parse(endpoint_json(s, 0));
  EXPECT_TRUE(v.at("metrics").is_null());
  EXPECT_TRUE(v.at("kv_events").is_null());
  EXPECT_TRUE(v.at("effective_load").at("saturation").is_null());
  EXPECT_TRUE(v.at("effective_load").at("saturated").as_bool());
  EXPECT_EQ(v.at("health").as_string(), "healthy");
}

TEST(AdminJson, EndpointLoraStateFromScrapeAndPlacement) {
  EndpointSnapshot s;
  s.endpoint.spec.url = "http://a:1";
  json::value none = parse(endpoint_json(s, 0));
  EXPECT_TRUE(none.at("lora").is_null());  // no LoRA reported, no placement

  s.endpoint.metrics = route::ScrapedMetrics{};
  s.endpoint.metrics->lora = {.max_loras = 4, .running = {"sql", "chat"}, .waiting = {"math"}};
  json::value scraped = parse(endpoint_json(s, 0));
  const json::value& l = scraped.at("lora");
  EXPECT_EQ(l.at("max_loras").as_int64(), 4);
  ASSERT_EQ(l.at("running").as_array().size(), 2u);
  EXPECT_EQ(l.at("running").as_array().at(0).as_string(), "sql");
  EXPECT_EQ(l.at("running").as_array().at(1).as_string(), "chat");
  EXPECT_EQ(l.at("waiting").as_array().at(0).as_string(), "math");
  EXPECT_TRUE(l.at("placed").is_null());

  s.endpoint.metrics->lora = {};  // the engine stopped reporting: placement alone
  s.endpoint.lora_placed = route::LoraPlaced{.loaded = {"sql"}, .loading = {"math"}};
  json::value placed = parse(endpoint_json(s, 0));
  const json::value& p = placed.at("lora");
  EXPECT_TRUE(p.at("max_loras").is_null());
  EXPECT_TRUE(p.at("running").as_array().empty());
  EXPECT_EQ(p.at("placed").at("loaded").as_array().at(0).as_string(), "sql");
  EXPECT_EQ(p.at("placed").at("loading").as_array().at(0).as_string(), "math");
}

TEST(AdminJson, AddEndpointBody) {
  auto r = parse_add_endpoint(
      R"({"url":"http://127.0.0.1:8003/","role":"prefill","zone":"z","rack":"r",)"
      R"("labels":{"gpu":"a100"},"kv_capacity_blocks":1000,)"
      R"("kv_events":{"publisher":"tcp://127.0.0.1:5557","replay":"tcp://127.0.0.1:5558"}})",
      false);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->spec.url, "http://127.0.0.1:8003");  // trailing slash dropped
  EXPECT_EQ(r->spec.role, Role::kPrefill);
  EXPECT_EQ(r->spec.zone, "z");
  EXPECT_EQ(r->spec.rack, "r");
  EXPECT_EQ(r->spec.label("gpu"), "a100");
  EXPECT_EQ(r->spec.kv_capacity_blocks, 1000u);
  ASSERT_TRUE(r->kv_events);
  EXPECT_EQ(r->kv_events->publisher, "tcp://127.0.0.1:5557");
  EXPECT_EQ(r->kv_events->replay, "tcp://127.0.0.1:5558");

  auto minimal = parse_add_endpoint(R"({"url":"http://h:1"})", false);
  ASSERT_TRUE(minimal) << minimal.error();
  EXPECT_EQ(minimal->spec.role, Role::kBoth);
  EXPECT_FALSE(minimal->kv_events);
}

TEST(AdminJson, AddEndpointErrorsNameTheField) {
  auto err = [](std::string_view body, bool bind = false) {
    auto r = parse_add_endpoint(body, bind);
    return r ? std::string("(ok)") : r.error();
  };
  EXPECT_EQ(err("{"), err("{"));  // deterministic
  EXPECT_TRUE(err("{").starts_with("body is not valid JSON")) << err("{");
  EXPECT_EQ(err("[]"), "body must be a JSON object");
  EXPECT_EQ(err("{}"), "url: missing");
  EXPECT_EQ(err(R"({"url":"127.0.0.1:80"})"), "url: expected http://host:port, got '127.0.0.1:80'");
  EXPECT_EQ(err(R"({"url":"http://h:1/v1"})"),
            "url: expected http://host:port, got 'http://h:1/v1'");
  EXPECT_EQ(err(R"({"url":"http://h:1","role":"both2"})"),
            "role: expected both, prefill or decode");
  EXPECT_EQ(err(R"({"url":"http://h:1","rol":"both"})"), "rol: unknown field");
  EXPECT_EQ(err(R"({"url":"http://h:1","kv_capacity_blocks":-1})"),
            "kv_capacity_blocks: expected a whole number in [0, 2147483648]");
  EXPECT_EQ(err(R"({"url":"http://h:1","kv_events":{}})"),
            "kv_events.publisher: missing (or set the pool's kv_events_bind)");
  EXPECT_EQ(err(R"({"url":"http://h:1","kv_events":{"publisher":"h:1"}})"),
            "kv_events.publisher: expected tcp://host:port");
  EXPECT_EQ(err(R"({"url":"http://h:1","kv_events":{"topic":"t"}})", true), "(ok)");
  EXPECT_EQ(err(R"({"url":"http://h:1","kv_events":{}})", true),
            "kv_events.topic: required with the pool's kv_events_bind");
  EXPECT_EQ(err(R"({"url":"http://h:1","kv_events":{"publish":"x"}})"),
            "kv_events.publish: unknown field");
}

TEST(AdminJson, PolicyRendersEveryParameter) {
  route::RouterConfig c;
  c.policy = {"kv-cost", {{"overlap_weight", "2"}, {"mode", "fast"}}};
  c.overlap_source = route::OverlapSource::kApprox;
  json::value v = parse(router_config_json(c));
  EXPECT_EQ(v.at("policy").as_string(), "kv-cost");
  EXPECT_EQ(v.at("params").at("overlap_weight").as_int64(), 2);  // whole: an integer
  EXPECT_EQ(v.at("params").at("mode").as_string(), "fast");
  EXPECT_EQ(v.at("filters").as_array().size(), 1u);
  EXPECT_EQ(v.at("filters").as_array().at(0).as_string(), "saturation");
  EXPECT_EQ(v.at("overlap").as_string(), "approx");
  EXPECT_EQ(v.at("block_size").as_int64(), 16);
  EXPECT_DOUBLE_EQ(v.at("saturation").at("kv_threshold").to_number<double>(), 0.8);
  EXPECT_DOUBLE_EQ(v.at("saturation").at("metrics_max_age").to_number<double>(), 5);
  EXPECT_EQ(v.at("pd").at("mode").as_string(), "auto");
  EXPECT_FALSE(v.at("early_reject").at("enabled").as_bool());
}

TEST(AdminJson, PolicyPatchMergesAndPutReplaces) {
  route::RouterConfig c;
  c.policy = {"kv-cost", {{"overlap_weight", "2"}}};
  c.overlap_source = route::OverlapSource::kApprox;
  c.saturation.queue_threshold = 9;

  auto p = apply_policy_body(c, R"({"params":{"temperature":0.5}})", false);
  ASSERT_TRUE(p) << p.error();
  ASSERT_EQ(p->policy.params.size(), 2u);
  EXPECT_EQ(p->policy.params[0], (std::pair<std::string, std::string>{"overlap_weight", "2"}));
  EXPECT_EQ(p->policy.params[1], (std::pair<std::string, std::string>{"temperature", "0.5"}));
  EXPECT_EQ(p->saturation.queue_threshold, 9);

  p = apply_policy_body(c,
                        R"({"params":{"overlap_weight":null},"saturation":{"kv_threshold":0.9},)"
                        R"("early_reject.enabled":true,"pd":{"mode":"off"},"filters":[]})",
                        false);
  ASSERT_TRUE(p) << p.error();
  EXPECT_TRUE(p->policy.params.empty());
  EXPECT_DOUBLE_EQ(p->saturation.kv_threshold, 0.9);
  EXPECT_TRUE(p->early_reject.enabled);
  EXPECT_EQ(p->pd.mode, route::PdMode::kOff);
  EXPECT_TRUE(p->filters.empty());

  // A new policy starts from its defaults.
  p = apply_policy_body(c, R"({"policy":"approx-prefix"})", false);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->policy.name, "approx-prefix");
  EXPECT_TRUE(p->policy.params.empty());

  // PUT: defaults, but the block size and overlap source stay.
  p = apply_policy_body(c, R"({"policy":"kv-cost","params":{"overlap_weight":3}})", true);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->policy.params.size(), 1u);
  EXPECT_EQ(p->saturation.queue_threshold, 5);
  EXPECT_EQ(p->overlap_source, route::OverlapSource::kApprox);

  p = apply_policy_body(c, R"({"overlap":"both","filters":[{"name":"saturation"}]})", false);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->overlap_source, route::OverlapSource::kBoth);
  ASSERT_EQ(p->filters.size(), 1u);
}

TEST(AdminJson, PolicyErrorsNameTheField) {
  route::RouterConfig c;
  auto err = [&](std::string_view body) {
    auto r = apply_policy_body(c, body, false);
    return r ? std::string("(ok)") : r.error();
  };
  EXPECT_TRUE(err("nope").starts_with("body is not valid JSON"));
  EXPECT_EQ(err(R"({"policy":[3]})"), "1:11: policy: expected a name");
  EXPECT_EQ(err(R"({"params":[1]})"), "1:11: params: expected a mapping");
  EXPECT_EQ(err(R"({"params":{"overlap_weight":[1]}})"),
            "1:29: params.overlap_weight: expected a value");
  EXPECT_EQ(err(R"({"saturation":{"kv_threshold":0}})"),
            "1:1: router: saturation.kv_threshold must be > 0");
  EXPECT_EQ(err(R"({"saturation":{"kv_threshold":"high"}})"),
            "1:31: saturation.kv_threshold: expected a number");
  EXPECT_EQ(err(R"({"saturation":{"shed":1}})"), "1:23: saturation.shed: expected true or false");
  EXPECT_EQ(err(R"({"colour":"blue"})"), "1:2: colour: unknown field");
  EXPECT_EQ(err(R"({"filters":[[3]]})"), "1:13: filters[0]: expected a mapping");
  EXPECT_EQ(err(R"({"block_size":32})"), "block_size: fixed by the pool's block_size (16)");
  // Found by the admin_api fuzz target: JSON reads a body that starts with a bare
  // carriage return as an object, YAML as a scalar; it used to throw out of the handler.
  EXPECT_EQ(err("\r{\"policy\":\"approx-prefix\",\"saturation.queue_threshold\":8}"),
            "body: must be a JSON object");
  EXPECT_EQ(err("\r{\"block_size\":16}"), "body: must be a JSON object");
}

TEST(AdminJson, RouteViewNamesEndpointsAndCosts) {
  route::Explanation x;
  x.decision.endpoint = 1;
  x.decision.prompt_blocks = 10;
  x.decision.matched_blocks = 8;
  x.decision.cached_blocks = 8;
  x.decision.prefill_tokens = 40;
  x.decision.cost = 12.5;
  route::CandidateView a{.endpoint = 0, .gpu_blocks = 0, .cost = 30.0};
  route::CandidateView b{.endpoint = 1,
                         .gpu_blocks = 8,
                         .cached_blocks = 8,
                         .cost = 12.5,
                         .terms = {{"prefill", 2.5}, {"decode", 10}}};
  route::CandidateView c{.endpoint = 2};
  x.endpoints = {a, b, c};
  route::RouterConfig config;
  json::value v = parse(explanation_json(
      x, 170, config, [](route::EndpointId id) { return "http://e" + std::to_string(id); },
      [](route::EndpointId id) {
        return id == 2 ? route::Health::kDraining : route::Health::kHealthy;
      }));
  EXPECT_EQ(v.at("prompt_tokens").as_int64(), 170);
  EXPECT_EQ(v.at("prompt_blocks").as_int64(), 10);
  EXPECT_EQ(v.at("policy").as_string(), "kv-cost");
  const json::value& d = v.at("decision");
  EXPECT_TRUE(d.at("accepted").as_bool());
  EXPECT_EQ(d.at("reason").as_string(), "ok");
  EXPECT_EQ(d.at("url").as_string(), "http://e1");
  EXPECT_EQ(d.at("matched_blocks").as_int64(), 8);
  EXPECT_DOUBLE_EQ(d.at("cost").to_number<double>(), 12.5);
  const json::array& eps = v.at("endpoints").as_array();
  ASSERT_EQ(eps.size(), 3u);
  EXPECT_EQ(eps[1].at("matched_blocks").as_int64(), 8);
  EXPECT_DOUBLE_EQ(eps[0].at("cost").to_number<double>(), 30);
  EXPECT_TRUE(eps[2].at("cost").is_null());
  EXPECT_DOUBLE_EQ(eps[1].at("terms").at("prefill").to_number<double>(), 2.5);
  EXPECT_DOUBLE_EQ(eps[1].at("terms").at("decode").to_number<double>(), 10);
  EXPECT_TRUE(eps[0].at("terms").as_object().empty());
  EXPECT_EQ(eps[2].at("health").as_string(), "draining");

  route::Explanation rejected;
  rejected.decision.reason = route::RejectReason::kNoHealthyEndpoints;
  v = parse(explanation_json(
      rejected, 0, config, [](route::EndpointId) { return std::string(); },
      [](route::EndpointId) { return route::Health::kHealthy; }));
  EXPECT_FALSE(v.at("decision").at("accepted").as_bool());
  EXPECT_EQ(v.at("decision").at("reason").as_string(), "no_healthy_endpoints");
  EXPECT_EQ(v.at("decision").at("http_status").as_int64(), 503);
}

TEST(AdminJson, PoolSummaryAndLatencyHistory) {
  route::Endpoint a;
  a.health = route::Health::kHealthy;
  a.metrics = route::ScrapedMetrics{.waiting = 2, .running = 3, .kv_usage = 0.5};
  a.load.in_flight = 4;
  a.load.routed_total = 10;
  route::Endpoint b;
  b.health = route::Health::kUnhealthy;
  b.load.failed_total = 2;
  PoolSummary sum;
  sum.add(a, false, 100, 7);
  sum.add(b, true, 0, 1);
  json::value v = parse(summary_json(sum));
  EXPECT_EQ(v.at("endpoints").as_int64(), 2);
  EXPECT_EQ(v.at("healthy").as_int64(), 1);
  EXPECT_EQ(v.at("unhealthy").as_int64(), 1);
  EXPECT_EQ(v.at("breakers_open").as_int64(), 1);
  EXPECT_EQ(v.at("waiting").as_int64(), 2);
  EXPECT_EQ(v.at("running").as_int64(), 3);
  EXPECT_DOUBLE_EQ(v.at("kv_usage_mean").to_number<double>(), 0.5);  // over the scraped one
  EXPECT_EQ(v.at("in_flight").as_int64(), 4);
  EXPECT_EQ(v.at("failed_total").as_int64(), 2);
  EXPECT_EQ(v.at("precise_blocks").as_int64(), 100);
  EXPECT_EQ(v.at("approx_blocks").as_int64(), 8);

  json::value h = parse(
      latency_history_json({.ttft = {std::nullopt, 0.0123456}, .itl = {0.002, std::nullopt}}));
  ASSERT_EQ(h.at("ttft_ms").as_array().size(), 2u);
  EXPECT_TRUE(h.at("ttft_ms").at(0).is_null());
  EXPECT_DOUBLE_EQ(h.at("ttft_ms").at(1).to_number<double>(), 12.35);
  EXPECT_DOUBLE_EQ(h.at("itl_ms").at(0).to_number<double>(), 2);
  EXPECT_TRUE(h.at("itl_ms").at(1).is_null());

  // An endpoint shows its history only when it was gathered (?history=1).
  EndpointSnapshot s;
  EXPECT_FALSE(parse(endpoint_json(s, 0)).as_object().contains("history"));
  s.history = LatencyHistoryView{.ttft = {0.5}, .itl = {0.01}};
  EXPECT_DOUBLE_EQ(parse(endpoint_json(s, 0)).at("history").at("ttft_ms").at(0).to_number<double>(),
                   500);
}

}  // namespace
}  // namespace kvgate::gateway
