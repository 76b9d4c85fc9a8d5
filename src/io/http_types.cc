#include "io/http_types.h"

#include "io/ascii.h"

namespace kvgate::io {

const std::string* find_header(const std::vector<HttpHeader>& headers, std::string_view name) {
  for (const HttpHeader& h : headers) {
    if (iequals(h.name, name)) return &h.value;
  }
  return nullptr;
}

std::optional<std::string_view> HeaderFields::find(std::string_view name) const {
  for (size_t i = 0; i < size(); ++i) {
    if (iequals(this->name(i), name)) return value(i);
  }
  return std::nullopt;
}

void HeaderFields::clear() {
  text_.clear();
  refs_.clear();
}

void HeaderFields::add(std::string_view name, std::string_view value) {
  const auto at = static_cast<uint32_t>(text_.size());
  text_.append(name).append(value);
  refs_.push_back(Ref{at, static_cast<uint32_t>(name.size()),
                      at + static_cast<uint32_t>(name.size()),
                      static_cast<uint32_t>(value.size())});
}

Result<Url> parse_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Error("unsupported URL \"" + std::string(url) + "\" (http:// only)");
  }
  std::string_view rest = url.substr(kScheme.size());
  // A fragment is never sent (RFC 3986); a data-parallel rank's endpoint URL carries one
  // (core/route/data_parallel.h) and is reached at its address.
  rest = rest.substr(0, rest.find('#'));
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  Url out;
  out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return Error("bad IPv6 host in \"" + std::string(url) + "\"");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    out.port = after.size() > 1 && after.front() == ':' ? std::string(after.substr(1)) : "80";
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    out.port = colon == std::string_view::npos ? "80" : std::string(authority.substr(colon + 1));
  }
  if (out.host.empty() || out.port.empty() ||
      out.port.find_first_not_of("0123456789") != std::string::npos || out.port.size() > 5 ||
      std::stoi(out.port) < 1 || std::stoi(out.port) > 65535) {
    return Error("bad host or port in URL \"" + std::string(url) + "\"");
  }
  return out;
}

}  // namespace kvgate::io
