// Trace context through `kvgate serve` and real `kvgate engine` processes in a P/D pair
// (docs/tracing.md): a client's traceparent reaches the prefill and the decode engine
// with the client's trace id and a distinct parent span id each (the gateway's hop
// spans), tracestate passed on unchanged; the spans the gateway exports reach an OTLP
// receiver in the test as OTLP/HTTP JSON with the schema's field names; a request without
// a traceparent at ratio 1.0 starts a fresh trace, and a client's unsampled one is not
// traced.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "core/trace/trace_context.h"
#include "io/http_server.h"
#include "support/eventually.h"
#include "support/gateway_fixture.h"

namespace kvgate::testing {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace gateway_trace_test {

// An OTLP/HTTP collector: keeps every body POSTed to /v1/traces.
class OtlpReceiver {
 public:
  OtlpReceiver() {
    io::HttpServerOptions o;
    o.threads = 1;
    auto s = io::HttpServer::start(
        o, [this](io::HttpRequest&& req, std::shared_ptr<io::ResponseStream> stream) {
          if (req.method == "POST" && req.path == "/v1/traces" &&
              req.header("content-type").value_or("") == "application/json") {
            std::lock_guard lock(mu_);
            bodies_.push_back(std::move(req.body));
            return stream->respond(io::HttpResponse{200, "application/json", {}, "{}"});
          }
          stream->respond(io::HttpResponse{400, "application/json", {}, "{}"});
        });
    if (s) {
      server_ = std::move(*s);
    } else {
      ADD_FAILURE() << s.error();
    }
  }
  ~OtlpReceiver() {
    if (server_) server_->stop(std::chrono::milliseconds(0));
  }
  std::string url() const {
    return server_ ? "http://127.0.0.1:" + std::to_string(server_->port()) + "/v1/traces" : "";
  }

  // Every span received so far, checked against the OTLP JSON field names on the way.
  std::vector<boost::json::object> spans() {
    std::lock_guard lock(mu_);
    std::vector<boost::json::object> out;
    for (const std::string& body : bodies_) {
      const boost::json::value v = parse_json(body);
      for (const auto& rs : v.at("resourceSpans").as_array()) {
        const auto& attr = rs.at("resource").at("attributes").at(0);
        EXPECT_EQ(attr.at("key").as_string(), "service.name");
        EXPECT_EQ(attr.at("value").at("stringValue").as_string(), "kvgate-trace-test");
        for (const auto& ss : rs.at("scopeSpans").as_array()) {
          EXPECT_EQ(ss.at("scope").at("name").as_string(), "kvgate");
          for (const auto& s : ss.at("spans").as_array()) {
            const auto& o = s.as_object();
            for (const char* field : {"traceId", "spanId", "name", "kind", "startTimeUnixNano",
                                      "endTimeUnixNano", "attributes"}) {
              EXPECT_TRUE(o.contains(field)) << field << " missing in " << s;
            }
            // Status: left out when UNSET (its default), else its code (an integer).
            if (o.contains("status")) {
              EXPECT_TRUE(o.at("status").at("code").is_int64()) << s;
              EXPECT_NE(o.at("status").at("code").as_int64(), 0) << s;
            }
            EXPECT_EQ(o.at("traceId").as_string().size(), 32u);
            EXPECT_EQ(o.at("spanId").as_string().size(), 16u);
            EXPECT_TRUE(o.at("kind").is_int64());
            // 64-bit integers are decimal strings in OTLP JSON.
            EXPECT_TRUE(o.at("startTimeUnixNano").is_string());
            EXPECT_LE(std::stoll(std::string(o.at("startTimeUnixNano").as_string())),
                      std::stoll(std::string(o.at("endTimeUnixNano").as_string())));
            out.push_back(o);
          }
        }
      }
    }
    return out;
  }

 private:
  std::unique_ptr<io::HttpServer> server_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
};

// The traceparents an engine logged ("... traceparent=VALUE"), parsed, with the line.
struct Logged {
  trace::TraceParent parent;
  std::string line;
};
std::vector<Logged> logged(const EngineProcess& e) {
  std::vector<Logged> out;
  const std::string err = e.proc->errors();
  size_t at = 0;
  while ((at = err.find("traceparent=", at)) != std::string::npos) {
    const size_t begin = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
    const size_t end = err.find('\n', at);
    std::string line = err.substr(begin, end == std::string::npos ? end : end - begin);
    auto p = trace::parse_traceparent(err.substr(at + 12, 55));
    if (p) out.push_back({*p, std::move(line)});
    at += 12;
  }
  return out;
}

std::string trace_yaml(const EngineProcess& prefill, const EngineProcess& decode,
                       const std::string& collector, double ratio) {
  return "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
         "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
         "tracing: {ratio: " +
         std::to_string(ratio) + ", collector: " + collector +
         ", service_name: kvgate-trace-test, flush_ms: 50}\n"
         "pools:\n  pd:\n    block_size: 16\n    scrape_interval_ms: 50\n"
         "    router:\n      policy: round-robin\n"
         "    endpoints:\n"
         "      - {url: " +
         prefill.url + ", role: prefill}\n      - {url: " + decode.url +
         ", role: decode}\n"
         "models:\n  - name: sim\n    pool: pd\n";
}

std::string chat_body(const std::string& content) {
  return R"({"model":"sim","messages":[{"role":"user","content":")" + content +
         R"("}],"max_tokens":4})";
}

EngineProcess pd_engine(const std::string& role) {
  return EngineProcess(
      {"--time-scale", "0.01", "--model", "sim", "--block-size", "16", "--role", role});
}

// An OTLP receiver, a P/D pair of engines, and a gateway in front of them sampling at
// `ratio` that exports its spans to the receiver.
struct TracedPdPair {
  OtlpReceiver receiver;
  EngineProcess prefill = pd_engine("prefill");
  EngineProcess decode = pd_engine("decode");
  GatewayProcess gw;

  explicit TracedPdPair(double ratio) : gw(trace_yaml(prefill, decode, receiver.url(), ratio)) {}
  // All four started (each says why it did not).
  bool up() const {
    return !receiver.url().empty() && !prefill.url.empty() && !decode.url.empty() &&
           !gw.url.empty();
  }
};

TEST(GatewayTrace, ClientTraceReachesBothEnginesOfAPdPairAndTheCollector) {
  TracedPdPair pd(0.0);
  ASSERT_TRUE(pd.up());

  const std::string client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string client_span = "00f067aa0ba902b7";
  auto r = pd.gw.post("/v1/chat/completions", chat_body(words_prompt("traced", 60)),
                      {{"traceparent", "00-" + client_trace + "-" + client_span + "-01"},
                       {"tracestate", "vendor=abc"}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_NE(r.header("x-kvgate-prefill-endpoint"), nullptr) << "not disaggregated";

  // Both engines logged the client's trace, each hop with its own parent span id.
  ASSERT_TRUE(eventually([&] { return !logged(pd.prefill).empty() && !logged(pd.decode).empty(); }))
      << pd.prefill.proc->errors() << pd.decode.proc->errors();
  const Logged p = logged(pd.prefill).front();
  const Logged d = logged(pd.decode).front();
  EXPECT_EQ(trace::to_hex(p.parent.trace_id), client_trace) << p.line;
  EXPECT_EQ(trace::to_hex(d.parent.trace_id), client_trace) << d.line;
  EXPECT_NE(p.parent.span_id, d.parent.span_id);
  EXPECT_NE(trace::to_hex(p.parent.span_id), client_span);
  EXPECT_NE(trace::to_hex(d.parent.span_id), client_span);
  EXPECT_TRUE(p.parent.is_sampled());
  EXPECT_NE(p.line.find("tracestate=vendor=abc"), std::string::npos) << p.line;
  EXPECT_NE(d.line.find("tracestate=vendor=abc"), std::string::npos) << d.line;

  // The collector got the server span (child of the client's span) and the two hop spans
  // (children of the server span) whose ids the engines received.
  std::vector<boost::json::object> spans;
  auto of_trace = [&] {
    std::vector<boost::json::object> out;
    for (auto& s : pd.receiver.spans()) {
      if (s.at("traceId").as_string() == client_trace) out.push_back(s);
    }
    return out;
  };
  ASSERT_TRUE(eventually([&] { return (spans = of_trace()).size() >= 3; }));
  const boost::json::object* server = nullptr;
  std::set<std::string> hop_ids;
  for (const auto& s : spans) {
    if (s.at("kind").as_int64() == 2) server = &s;
    if (s.at("kind").as_int64() == 3) hop_ids.insert(std::string(s.at("spanId").as_string()));
  }
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->at("parentSpanId").as_string(), client_span);
  EXPECT_TRUE(hop_ids.contains(trace::to_hex(p.parent.span_id)));
  EXPECT_TRUE(hop_ids.contains(trace::to_hex(d.parent.span_id)));
  auto nanos = [](const boost::json::object& s, const char* field) {
    return std::stoll(std::string(s.at(field).as_string()));
  };
  for (const auto& s : spans) {
    if (s.at("kind").as_int64() == 3) {
      EXPECT_EQ(s.at("parentSpanId"), server->at("spanId"));
      EXPECT_GE(nanos(s, "startTimeUnixNano"), nanos(*server, "startTimeUnixNano"));
      EXPECT_LE(nanos(s, "endTimeUnixNano"), nanos(*server, "endTimeUnixNano"));
    }
    // The decode hop, whose answer is the client's, ends with it.
    if (s.at("spanId").as_string() == trace::to_hex(d.parent.span_id)) {
      EXPECT_EQ(nanos(s, "endTimeUnixNano"), nanos(*server, "endTimeUnixNano"));
    }
  }
  // The routing decision is on the server span.
  std::set<std::string> keys;
  for (const auto& a : server->at("attributes").as_array()) {
    keys.insert(std::string(a.at("key").as_string()));
  }
  for (const char* k : {"kvgate.endpoint", "kvgate.route_us", "kvgate.matched_blocks",
                        "kvgate.cost", "kvgate.disaggregated", "http.response.status_code"}) {
    EXPECT_TRUE(keys.contains(k)) << k;
  }

  // The gateway's counters.
  auto m = io::http_fetch("GET", pd.gw.url + "/metrics");
  ASSERT_TRUE(m) << m.error();
  EXPECT_NE(m->body.find("kvgate_trace_spans_exported_total"), std::string::npos);
  EXPECT_NE(m->body.find("kvgate_trace_spans_dropped_total 0"), std::string::npos);
}

TEST(GatewayTrace, RatioOneStartsAFreshTraceAndAnUnsampledParentIsNotTraced) {
  TracedPdPair pd(1.0);
  ASSERT_TRUE(pd.up());

  // The client's tracer chose not to sample: kvgate follows it, whatever its ratio.
  auto unsampled =
      pd.gw.post("/v1/chat/completions", chat_body(words_prompt("unsampled", 40)),
                 {{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}});
  ASSERT_EQ(unsampled.status, 200) << unsampled.body;
  auto fresh = pd.gw.post("/v1/chat/completions", chat_body(words_prompt("fresh", 40)));
  ASSERT_EQ(fresh.status, 200) << fresh.body;

  // Both engines' log lines arrive through their own pipes: wait for each.
  ASSERT_TRUE(eventually([&] { return !logged(pd.decode).empty() && !logged(pd.prefill).empty(); }))
      << pd.decode.proc->errors() << pd.prefill.proc->errors();
  const auto on_decode = logged(pd.decode);
  ASSERT_EQ(on_decode.size(), 1u) << pd.decode.proc->errors();
  const std::string trace_id = trace::to_hex(on_decode[0].parent.trace_id);
  EXPECT_NE(trace_id, "0af7651916cd43dd8448eb211c80319c");
  ASSERT_EQ(logged(pd.prefill).size(), 1u) << pd.prefill.proc->errors();
  EXPECT_EQ(trace::to_hex(logged(pd.prefill)[0].parent.trace_id), trace_id);

  // Its server span is a root (no parentSpanId).
  ASSERT_TRUE(eventually([&] {
    for (const auto& s : pd.receiver.spans()) {
      if (s.at("traceId").as_string() == trace_id && s.at("kind").as_int64() == 2) {
        return !s.contains("parentSpanId");
      }
    }
    return false;
  }));
}

// The hops besides generation: a relayed /tokenize, the engine fallback's /tokenize (a
// pool with `tokenize: engine`) made for a chat request's routing, and a stored
// response's GET each carry the client's trace with a span id of their own, which the
// gateway exports as a CLIENT span under its server span.
TEST(GatewayTrace, RelayEngineTokenizeAndStoredFetchCarryTheTrace) {
  OtlpReceiver receiver;
  ASSERT_FALSE(receiver.url().empty());
  EngineProcess engine({"--time-scale", "0.01", "--model", "sim", "--block-size", "16"});
  ASSERT_FALSE(engine.url.empty());
  GatewayProcess gw(
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 2000, connect_ms: 1000}\n"
      "tracing: {ratio: 0.0, collector: " +
      receiver.url() +
      ", service_name: kvgate-trace-test, flush_ms: 50}\n"
      "pools:\n  main:\n    block_size: 16\n    tokenize: {mode: engine, timeout_ms: 5000}\n"
      "    endpoints: [" +
      engine.url + "]\nmodels:\n  - name: sim\n    pool: main\n");
  ASSERT_FALSE(gw.url.empty());

  const std::string client_trace = "5bf92f3577b34da6a3ce929d0e0e4737";
  const std::vector<io::HttpHeader> traced = {
      {"traceparent", "00-" + client_trace + "-00f067aa0ba902b8-01"}};
  auto tok = gw.post("/tokenize", R"({"model":"sim","prompt":"one two three"})", traced);
  ASSERT_EQ(tok.status, 200) << tok.body;
  auto chat = gw.post("/v1/chat/completions", chat_body(words_prompt("engine-ids", 40)), traced);
  ASSERT_EQ(chat.status, 200) << chat.body;
  // Created untraced (ratio 0): only the GET below carries the trace.
  auto created =
      gw.post("/v1/responses", R"({"model":"sim","input":"hello","max_output_tokens":3})");
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id(parse_json(created.body).at("id").as_string());
  auto got =
      io::http_fetch("GET", gw.url + "/v1/responses/" + id, "", traced, std::chrono::seconds(10));
  ASSERT_TRUE(got) << got.error();
  ASSERT_EQ(got->status, 200) << got->body;

  // The engine saw four traced requests: the relayed /tokenize, the fallback's /tokenize,
  // the chat completion and the stored response's GET; each its own parent span id.
  ASSERT_TRUE(eventually([&] { return logged(engine).size() >= 4; })) << engine.proc->errors();
  const std::vector<Logged> lines = logged(engine);
  ASSERT_EQ(lines.size(), 4u) << engine.proc->errors();
  std::set<std::string> parents;
  int tokenize = 0;
  int stored = 0;
  for (const Logged& l : lines) {
    EXPECT_EQ(trace::to_hex(l.parent.trace_id), client_trace) << l.line;
    parents.insert(trace::to_hex(l.parent.span_id));
    if (l.line.find(" /tokenize ") != std::string::npos) ++tokenize;
    if (l.line.find(" /v1/responses/" + id + " ") != std::string::npos) ++stored;
  }
  EXPECT_EQ(parents.size(), 4u);
  EXPECT_EQ(tokenize, 2) << engine.proc->errors();
  EXPECT_EQ(stored, 1) << engine.proc->errors();

  // Each engine-side parent is a CLIENT span the gateway exported, under a server span.
  std::map<std::string, boost::json::object> by_id;
  ASSERT_TRUE(eventually([&] {
    by_id.clear();
    for (auto& s : receiver.spans()) {
      if (s.at("traceId").as_string() == client_trace) {
        by_id[std::string(s.at("spanId").as_string())] = s;
      }
    }
    for (const std::string& p : parents) {
      if (!by_id.contains(p)) return false;
    }
    return by_id.size() >= 7;  // 3 server spans, 4 hop spans
  }));
  std::multiset<std::string> names;
  for (const std::string& p : parents) {
    const boost::json::object& hop = by_id.at(p);
    EXPECT_EQ(hop.at("kind").as_int64(), 3);
    names.insert(std::string(hop.at("name").as_string()));
    const std::string parent(hop.at("parentSpanId").as_string());
    ASSERT_TRUE(by_id.contains(parent)) << parent;
    EXPECT_EQ(by_id.at(parent).at("kind").as_int64(), 2);
    EXPECT_FALSE(by_id.at(parent).contains("status"));  // UNSET
  }
  EXPECT_EQ(names, (std::multiset<std::string>{"kvgate.relay", "kvgate.stored", "kvgate.tokenize",
                                               "kvgate.upstream"}));
}

}  // namespace gateway_trace_test
}  // namespace kvgate::testing
