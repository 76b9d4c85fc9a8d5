// HTTP request heads and bodies (Content-Length and chunked) as the server reads them
// (src/io/http_server.cc): the plain head parser (http_head.h) against Beast's
// (http_parsers.h), and Beast's read of the whole request, in one piece and in the
// small pieces a socket may deliver, which must agree.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <string>

#include "fuzz/feed_parser.h"
#include "fuzz/fuzz_support.h"
#include "io/http_head.h"
#include "io/http_parsers.h"

namespace {

using namespace kvgate;
namespace http = boost::beast::http;

// The server's limits, smaller body limit so that 413 is reachable.
constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kBodyLimit = 64 * 1024;

struct Outcome {
  std::string error;  // empty: the request was read whole
  bool header_done = false;
  io::HttpRequest request;
  bool keep_alive = false;
  unsigned version = 0;
};

std::string show(const Outcome& o) {
  std::string s = "error [" + o.error + "] header " + std::to_string(o.header_done) + " " +
                  o.request.method + " " + o.request.target + " path " + o.request.path +
                  " query " + o.request.query + " v" + std::to_string(o.version) + " keep " +
                  std::to_string(o.keep_alive) + "\n";
  for (size_t i = 0; i < o.request.fields.size(); ++i) {
    s += std::string(o.request.fields.name(i)) + ": " + std::string(o.request.fields.value(i)) +
         "\n";
  }
  return s + "body " + std::to_string(o.request.body.size()) + " [" + o.request.body + "]";
}

// As wire::read_until does it: parse what is buffered, read more when that is not enough,
// the end of the input being the peer's close.
Outcome read_request(const std::vector<std::string_view>& in) {
  io::wire::RequestParser p;
  p.header_limit(static_cast<uint32_t>(kHeaderLimit));
  p.body_limit(kBodyLimit);
  p.eager(true);
  const boost::beast::error_code ec = fuzz::feed_parser(p, in);
  Outcome o;
  o.error = ec ? ec.message() : "";
  o.header_done = p.is_header_done();
  if (o.header_done) {
    o.keep_alive = p.keep_alive();
    o.version = p.version();
  }
  o.request = std::move(p.request);
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  const Outcome whole = read_request({in});
  const Outcome split = read_request(fuzz::pieces(in));
  // Both read the request, the same way, or both fail (Beast words some errors by what
  // it had buffered when it gave up: "bad field" whole, "partial message" in pieces).
  KVGATE_FUZZ_CHECK(whole.error.empty() == split.error.empty() &&
                        (!whole.error.empty() || show(whole) == show(split)),
                    "one piece:\n" + show(whole) + "\nin pieces:\n" + show(split));

  io::ParsedHead head;
  const io::HeadParse fast = io::parse_request_head(in, kHeaderLimit, head);
  if (fast != io::HeadParse::kDone) return 0;
  // The server leaves a head announcing too large a body to Beast, which answers 413.
  if (head.content_length > kBodyLimit) {
    KVGATE_FUZZ_CHECK(whole.error == http::make_error_code(http::error::body_limit).message(),
                      show(whole));
    return 0;
  }
  // Whatever the plain parser accepts, Beast accepts and reads the same way.
  KVGATE_FUZZ_CHECK(whole.header_done, "plain head that Beast refuses: " + whole.error);
  KVGATE_FUZZ_CHECK(head.size <= in.size(), "head past the input");
  KVGATE_FUZZ_CHECK(whole.request.method == head.method, show(whole));
  KVGATE_FUZZ_CHECK(whole.request.target == head.target, show(whole));
  KVGATE_FUZZ_CHECK(whole.version == head.version, show(whole));
  KVGATE_FUZZ_CHECK(whole.keep_alive == head.keep_alive, show(whole));
  KVGATE_FUZZ_CHECK(whole.request.fields.size() == head.field_count, show(whole));
  for (size_t i = 0; i < head.field_count; ++i) {
    KVGATE_FUZZ_CHECK(whole.request.fields.name(i) == head.fields[i].name, show(whole));
    KVGATE_FUZZ_CHECK(whole.request.fields.value(i) == head.fields[i].value, show(whole));
  }
  // The server then takes Content-Length bytes as the body (take_plain_head), as Beast.
  const std::string_view rest = in.substr(head.size);
  if (rest.size() >= head.content_length) {
    KVGATE_FUZZ_CHECK(whole.error.empty(), show(whole));
    KVGATE_FUZZ_CHECK(whole.request.body == rest.substr(0, head.content_length), show(whole));
  }
  // A shorter piece of a plain head is never a whole one.
  if (head.size > 0) {
    io::ParsedHead shorter;
    const size_t cut = head.size - 1 - (size % head.size);
    KVGATE_FUZZ_CHECK(
        io::parse_request_head(in.substr(0, cut), kHeaderLimit, shorter) != io::HeadParse::kDone,
        "prefix of " + std::to_string(cut) + " bytes parsed whole");
  }
  return 0;
}
