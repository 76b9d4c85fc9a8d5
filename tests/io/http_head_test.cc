// The fast head parser against Beast's: on real heads and on every one-byte mutation of
// them, whatever it accepts Beast accepts and reads the same way.
#include "io/http_head.h"

#include <gtest/gtest.h>

#include <boost/beast/http.hpp>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/find_headers.h"

namespace kvgate::io {
namespace {

namespace http = boost::beast::http;
constexpr size_t kLimit = 16 * 1024;

const std::vector<std::string>& requests() {
  static const std::vector<std::string> r = {
      // wrk
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\n"
      "Content-Type: application/json\r\n\r\n{}",
      // curl
      "POST /v1/completions HTTP/1.1\r\nHost: localhost:8000\r\nUser-Agent: curl/7.88.1\r\n"
      "Accept: */*\r\nAuthorization: Bearer sk-abc\r\nContent-Type: application/json\r\n"
      "Content-Length: 4\r\n\r\nnull",
      // the openai npm client
      "POST /v1/chat/completions HTTP/1.1\r\naccept: application/json\r\n"
      "authorization: Bearer kvg-0123456789abcdef\r\ncontent-type: application/json\r\n"
      "user-agent: OpenAI/JS 4.77.0\r\nx-stainless-lang: js\r\nx-stainless-retry-count: 0\r\n"
      "x-stainless-timeout: 600000\r\ncontent-length: 3\r\nAccept-Encoding: gzip,deflate\r\n"
      "Host: 127.0.0.1:41000\r\nConnection: keep-alive\r\n\r\n[1]",
      "GET /v1/models?limit=10&x=%20y HTTP/1.1\r\nHost: h\r\n\r\n",
      "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
      "GET /metrics HTTP/1.0\r\n\r\n",
      "GET /ready HTTP/1.1\r\nConnection: close\r\nX-Empty:\r\nX-Spaces: \t a b \t\r\n\r\n",
      "DELETE /admin/pools/p/endpoints/3 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
      // values longer than the parser's 16-byte steps, with tabs and obs-text inside
      "GET /x HTTP/1.1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\tcaf\xc3\xa9 \x80\xff of a "
      "long value that spans more than two steps\t \r\nX-B: 0123456789abcdef\r\n\r\n",
  };
  return r;
}

const std::vector<std::string>& responses() {
  static const std::vector<std::string> r = {
      // nginx
      "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 30 Nov 2026 10:00:00 GMT\r\n"
      "Content-Type: application/json\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n{}",
      // uvicorn (vLLM)
      "HTTP/1.1 200 OK\r\ndate: Mon, 30 Nov 2026 10:00:00 GMT\r\nserver: uvicorn\r\n"
      "content-length: 4\r\ncontent-type: application/json\r\n\r\nnull",
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Content-Length: 0\r\n\r\n",
      "HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\nx",
      "HTTP/1.1 404 \r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
  };
  return r;
}

struct Outcome {
  bool done = false;  // the head parsed
  bool error = false;
};

// Beast's parser, recording what it reads in wire order (as the server's and the
// upstream client's parsers receive it).
template <bool isRequest>
class Recorder final : public http::basic_parser<isRequest> {
 public:
  std::string method, target;
  int status = 0;
  unsigned version = 0;
  std::vector<std::pair<std::string, std::string>> fields;

 private:
  void on_request_impl(http::verb, boost::beast::string_view m, boost::beast::string_view t, int v,
                       boost::beast::error_code&) override {
    method = std::string(m);
    target = std::string(t);
    version = static_cast<unsigned>(v);
  }
  void on_response_impl(int code, boost::beast::string_view, int v,
                        boost::beast::error_code&) override {
    status = code;
    version = static_cast<unsigned>(v);
  }
  void on_field_impl(http::field, boost::beast::string_view n, boost::beast::string_view v,
                     boost::beast::error_code&) override {
    fields.emplace_back(std::string(n), std::string(v));
  }
  void on_header_impl(boost::beast::error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&,
                         boost::beast::error_code&) override {}
  size_t on_body_impl(boost::beast::string_view b, boost::beast::error_code&) override {
    return b.size();
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view,
                            boost::beast::error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view b,
                            boost::beast::error_code&) override {
    return b.size();
  }
  void on_finish_impl(boost::beast::error_code&) override {}
};

// Beast on `in`; when `fast` parsed the head, Beast must have too, and read the same.
template <bool isRequest>
void check_against_beast(const std::string& in, HeadParse fast, const ParsedHead& head,
                         size_t limit = kLimit) {
  Recorder<isRequest> p;
  p.header_limit(static_cast<uint32_t>(limit));
  p.eager(false);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < in.size() && !p.is_header_done()) {
    const size_t n = p.put(boost::asio::buffer(in.data() + used, in.size() - used), ec);
    used += n;
    if (ec || n == 0) break;
  }
  if (fast != HeadParse::kDone) return;
  ASSERT_TRUE(p.is_header_done()) << "fast accepted what Beast did not: " << ec.message() << "\n"
                                  << in;
  EXPECT_EQ(used, head.size) << in;
  EXPECT_EQ(p.version, head.version) << in;
  EXPECT_EQ(p.keep_alive(), head.keep_alive) << in;
  EXPECT_EQ(p.content_length().value_or(0), head.content_length) << in;
  if constexpr (isRequest) {
    EXPECT_EQ(p.method, head.method) << in;
    EXPECT_EQ(p.target, head.target) << in;
  } else {
    EXPECT_EQ(p.status, head.status) << in;
  }
  ASSERT_EQ(p.fields.size(), head.field_count) << in;
  for (size_t i = 0; i < head.field_count; ++i) {
    EXPECT_EQ(p.fields[i].first, head.fields[i].name) << in;
    EXPECT_EQ(p.fields[i].second, head.fields[i].value) << in;
  }
}

template <bool isRequest>
HeadParse parse(const std::string& in, ParsedHead& head) {
  return isRequest ? parse_request_head(in, kLimit, head) : parse_response_head(in, kLimit, head);
}

template <bool isRequest>
void run_corpus(const std::vector<std::string>& corpus) {
  for (const std::string& base : corpus) {
    ParsedHead head;
    ASSERT_EQ(parse<isRequest>(base, head), HeadParse::kDone) << base;
    check_against_beast<isRequest>(base, HeadParse::kDone, head);
    // Every prefix: more is needed, never a wrong answer.
    for (size_t n = 0; n < head.size; ++n) {
      EXPECT_EQ(parse<isRequest>(base.substr(0, n), head), HeadParse::kNeedMore) << n;
    }
  }
}

template <bool isRequest>
void run_mutations(const std::vector<std::string>& corpus) {
  const std::string bytes = std::string("\r\n \t:,;\"\\/aZ0~\x7f\x80\xff") + '\0';
  size_t accepted = 0, total = 0;
  for (const std::string& base : corpus) {
    ParsedHead head;
    ASSERT_EQ(parse<isRequest>(base, head), HeadParse::kDone);
    const size_t head_size = head.size;
    for (size_t i = 0; i < head_size; ++i) {
      std::vector<std::string> variants;
      for (char b : bytes) {
        std::string s = base;
        s[i] = b;  // replaced
        variants.push_back(s);
        s = base;
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(i), b);  // inserted
        variants.push_back(s);
      }
      std::string s = base;
      s.erase(i, 1);  // deleted
      variants.push_back(s);
      for (const std::string& v : variants) {
        ParsedHead h;
        const HeadParse fast = parse<isRequest>(v, h);
        check_against_beast<isRequest>(v, fast, h);
        ++total;
        if (fast == HeadParse::kDone) ++accepted;
      }
    }
  }
  // Most one-byte changes leave a plain head (a letter in a value...): the fast path
  // must not give up on those.
  EXPECT_GT(accepted, total / 5);
}

TEST(HttpHead, RequestsParseAsBeastReadsThem) { run_corpus<true>(requests()); }
TEST(HttpHead, ResponsesParseAsBeastReadsThem) { run_corpus<false>(responses()); }
TEST(HttpHead, RequestMutationsNeverDisagreeWithBeast) { run_mutations<true>(requests()); }
TEST(HttpHead, ResponseMutationsNeverDisagreeWithBeast) { run_mutations<false>(responses()); }

TEST(HttpHead, HeaderLimitAsBeastCountsIt) {
  const std::string head = "GET / HTTP/1.1\r\nX-Pad: " + std::string(100, 'p') + "\r\n\r\n";
  for (size_t limit = head.size() - 3; limit <= head.size() + 3; ++limit) {
    ParsedHead h;
    const HeadParse fast = parse_request_head(head, limit, h);
    EXPECT_EQ(fast == HeadParse::kDone, limit >= head.size()) << limit;
    check_against_beast<true>(head, fast, h, limit);
  }
}

TEST(HttpHead, LeavesTheUnusualToBeast) {
  ParsedHead h;
  const auto unsure = [&](const std::string& s) { return parse_request_head(s, kLimit, h); };
  EXPECT_EQ(unsure("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), HeadParse::kUnsure);
  EXPECT_EQ(unsure("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
            HeadParse::kUnsure);
  EXPECT_EQ(unsure("GET / HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n\r\n"),
            HeadParse::kUnsure);
  EXPECT_EQ(unsure("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"), HeadParse::kUnsure);
  EXPECT_EQ(unsure("GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n"), HeadParse::kUnsure);
  EXPECT_EQ(unsure("GET / HTTP/2.0\r\n\r\n"), HeadParse::kUnsure);
  EXPECT_EQ(unsure("GET / HTTP/1.1\nHost: h\n\n"), HeadParse::kUnsure);  // bare LF at once
  EXPECT_EQ(unsure("\x16\x03\x01\x02\x00"), HeadParse::kUnsure);         // TLS: no waiting
  EXPECT_EQ(parse_request_head(std::string(100, 'A'), 64, h), HeadParse::kUnsure);  // limit
  EXPECT_EQ(parse_response_head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", kLimit, h),
            HeadParse::kUnsure);
  EXPECT_EQ(parse_response_head("HTTP/1.1 200 OK\r\n\r\n", kLimit, h), HeadParse::kUnsure);
  EXPECT_EQ(parse_response_head("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", kLimit, h),
            HeadParse::kUnsure);
}

// find_headers finds what find does for each name, in one pass: the first field of each name,
// case-insensitive, nothing for an empty name or one no field has.
TEST(FindHeaders, TheFirstFieldOfEachNameAsFindDoes) {
  HeaderFields f;
  f.add("Host", "a");
  f.add("X-Kvgate-Priority", "high");
  f.add("x-session-id", "s1");
  f.add("x-kvgate-priority", "low");
  f.add("X-SLO-TTFT-MS", "200");
  const std::string_view names[] = {"x-kvgate-priority", "x-session-id", "x-slo-ttft-ms",
                                    "x-kvgate-tpot-ms", ""};
  std::optional<std::string_view> found[std::size(names)];
  found[3] = "stale";  // cleared: every slot is written
  find_headers(f, names, found);
  for (size_t i = 0; i < std::size(names); ++i) {
    EXPECT_EQ(found[i], names[i].empty() ? std::nullopt : f.find(names[i])) << names[i];
  }
  EXPECT_EQ(found[0], "high");
  EXPECT_EQ(found[1], "s1");
  EXPECT_EQ(found[2], "200");
  EXPECT_FALSE(found[3]);
  EXPECT_FALSE(found[4]);
}

}  // namespace
}  // namespace kvgate::io
