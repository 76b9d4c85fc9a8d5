// Engine responses as the upstream client reads them (src/io/upstream_client.cc): the plain
// head parser (http_head.h) against Beast's (http_parsers.h), and Beast's read of the
// whole response (Content-Length, chunked, or delimited by the close), in one piece and
// in small pieces, which must agree.
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

constexpr size_t kMaxResponseHead = 64 * 1024;  // upstream_client.cc's limit

struct Outcome {
  std::string error;
  bool header_done = false;
  int status = 0;
  bool keep_alive = false;
  io::HeaderFields fields;
  std::string body;
};

std::string show(const Outcome& o) {
  std::string s = "error [" + o.error + "] header " + std::to_string(o.header_done) + " status " +
                  std::to_string(o.status) + " keep " + std::to_string(o.keep_alive) + "\n";
  for (size_t i = 0; i < o.fields.size(); ++i) {
    s += std::string(o.fields.name(i)) + ": " + std::string(o.fields.value(i)) + "\n";
  }
  return s + "body " + std::to_string(o.body.size()) + " [" + o.body + "]";
}

// The head first (eager off, as read_message with header_only), then the body as it comes.
Outcome read_response(const std::vector<std::string_view>& in) {
  Outcome o;
  io::wire::ResponseParser p(o.fields, o.body);
  p.body_limit(boost::none);
  p.header_limit(kMaxResponseHead);
  p.eager(false);
  const boost::beast::error_code ec = fuzz::feed_parser(p, in, /*eager_after_head=*/true);
  o.error = ec ? ec.message() : "";
  o.header_done = p.is_header_done();
  if (o.header_done) {
    o.status = p.status();
    o.keep_alive = p.keep_alive();
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  const Outcome whole = read_response({in});
  const Outcome split = read_response(fuzz::pieces(in));
  // Both read the response, the same way, or both fail (the error's wording may differ).
  KVGATE_FUZZ_CHECK(whole.error.empty() == split.error.empty() &&
                        (!whole.error.empty() || show(whole) == show(split)),
                    "one piece:\n" + show(whole) + "\nin pieces:\n" + show(split));

  io::ParsedHead head;
  if (io::parse_response_head(in, kMaxResponseHead, head) != io::HeadParse::kDone) return 0;
  KVGATE_FUZZ_CHECK(whole.header_done, "plain head that Beast refuses: " + whole.error);
  KVGATE_FUZZ_CHECK(whole.status == head.status, show(whole));
  KVGATE_FUZZ_CHECK(whole.keep_alive == head.keep_alive, show(whole));
  KVGATE_FUZZ_CHECK(whole.fields.size() == head.field_count, show(whole));
  for (size_t i = 0; i < head.field_count; ++i) {
    KVGATE_FUZZ_CHECK(whole.fields.name(i) == head.fields[i].name, show(whole));
    KVGATE_FUZZ_CHECK(whole.fields.value(i) == head.fields[i].value, show(whole));
  }
  // The client then takes Content-Length bytes as the body, as Beast does.
  const std::string_view rest = in.substr(head.size);
  if (rest.size() >= head.content_length) {
    KVGATE_FUZZ_CHECK(whole.error.empty(), show(whole));
    KVGATE_FUZZ_CHECK(whole.body == rest.substr(0, head.content_length), show(whole));
  }
  return 0;
}
