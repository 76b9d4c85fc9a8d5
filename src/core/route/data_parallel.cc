#include "core/route/data_parallel.h"

#include <charconv>

namespace kvgate::route {
namespace {

constexpr std::string_view kFragment = "#dp";

}  // namespace

std::string dp_rank_url(std::string_view address, uint32_t rank) {
  std::string url(address);
  url += kFragment;
  url += std::to_string(rank);
  return url;
}

DpUrl split_dp_url(std::string_view url) {
  const size_t at = url.rfind(kFragment);
  if (at == std::string_view::npos) return {url, std::nullopt};
  const std::string_view digits = url.substr(at + kFragment.size());
  uint32_t rank = 0;
  const char* end = digits.data() + digits.size();
  auto [p, ec] = std::from_chars(digits.data(), end, rank);
  if (digits.empty() || ec != std::errc() || p != end) return {url, std::nullopt};
  return {url.substr(0, at), rank};
}

std::vector<EndpointSpec> expand_data_parallel(const EndpointSpec& spec, uint32_t size) {
  std::vector<EndpointSpec> out;
  if (size <= 1) {
    out.push_back(spec);
    return out;
  }
  out.reserve(size);
  for (uint32_t r = 0; r < size; ++r) {
    EndpointSpec s = spec;
    s.url = dp_rank_url(spec.url, r);
    out.push_back(std::move(s));
  }
  return out;
}

std::string dp_rank_zmq_endpoint(std::string_view endpoint, uint32_t rank) {
  std::string out(endpoint);
  if (endpoint.empty() || rank == 0) return out;
  if (endpoint.starts_with("inproc://")) return out + "_dp" + std::to_string(rank);
  if (!endpoint.starts_with("tcp://")) return out;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon < 6) return out;
  const std::string_view digits = endpoint.substr(colon + 1);
  uint32_t port = 0;
  const char* end = digits.data() + digits.size();
  auto [p, ec] = std::from_chars(digits.data(), end, port);
  if (digits.empty() || ec != std::errc() || p != end || port == 0) return out;
  return std::string(endpoint.substr(0, colon + 1)) + std::to_string(port + rank);
}

}  // namespace kvgate::route
