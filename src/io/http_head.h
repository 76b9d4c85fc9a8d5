// A fast, strict parser for the common HTTP/1.1 message head, on every request's path in
// both directions (client -> gateway, engine -> gateway).
//
// It accepts only a plain subset, and says kUnsure for anything outside it; the caller
// then parses the same bytes with Beast's full parser (which also produces the right
// error for bad input). So it never accepts what Beast would reject, and what it accepts
// it reads as Beast would (tests/io/http_head_test.cc checks both on a corpus and on
// mutations of it). The subset:
//   - request line `METHOD SP target SP HTTP/1.x CRLF`, status line `HTTP/1.x SP 3DIGIT
//     SP reason CRLF` (version 1.0 or 1.1);
//   - at most kMaxFields fields `name ":" OWS value OWS CRLF`, names tokens, values
//     visible ASCII, spaces, tabs and bytes >= 0x80; lines end with CRLF;
//   - the body is given by at most one Content-Length (digits only) or absent; a
//     Transfer-Encoding or Upgrade field, a Connection other than one `close` or
//     `keep-alive` token, a response without Content-Length, or a 1xx/204/304 status
//     are unsure.
// The views point into the parsed bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvgate::io {

struct HeadField {
  std::string_view name;
  std::string_view value;  // without surrounding spaces and tabs
};

struct ParsedHead {
  static constexpr size_t kMaxFields = 32;

  std::string_view method;  // requests
  std::string_view target;  // requests
  int status = 0;           // responses
  unsigned version = 11;    // 10 or 11
  std::array<HeadField, kMaxFields> fields;
  size_t field_count = 0;
  uint64_t content_length = 0;  // 0 when absent
  bool keep_alive = true;
  size_t size = 0;  // bytes of the head, through its blank line
};

enum class HeadParse {
  kNeedMore,  // no blank line yet, and nothing outside the subset so far (the lines so far
              // are not checked: a caller that waits for more may wait on bad input)
  kDone,      // `out` holds the head
  kUnsure,    // outside the subset (or malformed): let Beast's parser decide
};

// Parses the head at the start of `in`. A head longer than `max_bytes` is unsure.
HeadParse parse_request_head(std::string_view in, size_t max_bytes, ParsedHead& out);
HeadParse parse_response_head(std::string_view in, size_t max_bytes, ParsedHead& out);

}  // namespace kvgate::io
