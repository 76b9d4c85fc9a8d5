// Feeds a Beast parser the way io::wire::read_until reads a socket: parse what is
// buffered, take the next piece when that is not enough, the end of the pieces being the
// peer's close. Shared by the HTTP request and response targets.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::fuzz {

// The parser's error at the end: none when it finished, end_of_stream when nothing came,
// partial_message when the pieces ran out part-way. `eager_after_head`: read the head
// alone first, then the body as it comes (read_message with header_only).
template <typename Parser>
boost::beast::error_code feed_parser(Parser& p, const std::vector<std::string_view>& in,
                                     bool eager_after_head = false) {
  namespace http = boost::beast::http;
  std::string buffer;
  size_t next = 0;
  boost::beast::error_code ec;
  while (!p.is_done()) {
    if (!buffer.empty()) {
      const size_t used = p.put(boost::asio::buffer(buffer), ec);
      buffer.erase(0, used);
      if (eager_after_head && p.is_header_done()) p.eager(true);
      if (ec == http::error::need_more) {
        ec = {};
      } else if (ec) {
        break;
      } else if (used > 0) {
        continue;
      }
    }
    if (next == in.size()) {
      if (!p.got_some()) {
        ec = http::error::end_of_stream;
      } else {
        p.put_eof(ec);
        if (!ec && !p.is_done()) ec = http::error::partial_message;
      }
      break;
    }
    buffer.append(in[next++]);
  }
  return ec;
}

}  // namespace kvgate::fuzz
