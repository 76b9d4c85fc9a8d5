// Internal to src/io (http_server.cc, upstream_client.cc, and the fuzz targets in fuzz/):
// Beast's HTTP/1.1 parser fed straight into kvgate's own types, for the heads that the
// plain parser (http_head.h) leaves to it.
//
// RequestParser fills an HttpRequest (Beast's own message type allocates per header
// field, and would then be copied); ResponseParser fills a connection's HeaderFields and
// appends body bytes (chunked or not) to a string the reader consumes, so a pooled
// connection reuses its storage.
//
// Beast is included here: include this header only from the files above.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "io/http_types.h"

namespace kvgate::io::wire {

class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  HttpRequest request;
  unsigned version() const { return version_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb, string_view method, string_view target,
                       int version, error_code&) override {
    request.method.assign(method.data(), method.size());
    request.target.assign(target.data(), target.size());
    version_ = static_cast<unsigned>(version);
  }
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(boost::beast::http::field, string_view name, string_view value,
                     error_code&) override {
    request.fields.add(name, value);
  }
  void on_header_impl(error_code&) override {
    const std::string_view target = request.target;
    const size_t q = target.find('?');
    request.path.assign(target.substr(0, q));
    if (q != std::string_view::npos) request.query.assign(target.substr(q + 1));
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    if (length) request.body.reserve(static_cast<size_t>(*length));  // within body_limit
  }
  size_t on_body_impl(string_view body, error_code&) override {
    request.body.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override {
    request.body.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  unsigned version_ = 11;
};

class ResponseParser final : public boost::beast::http::basic_parser<false> {
 public:
  ResponseParser(HeaderFields& fields, std::string& body) : fields_(fields), body_(body) {
    fields_.clear();
  }
  int status() const { return status_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override { status_ = code; }
  void on_field_impl(boost::beast::http::field, string_view name, string_view value,
                     error_code&) override {
    fields_.add(name, value);
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(string_view body, error_code&) override {
    body_.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override {
    body_.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  HeaderFields& fields_;
  std::string& body_;
  int status_ = 0;
};

}  // namespace kvgate::io::wire
