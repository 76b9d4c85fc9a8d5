#include "discovery/source.h"

#include <fmt/format.h>

#include "discovery/dns_source.h"
#include "discovery/file_source.h"
#include "discovery/kubernetes_source.h"

namespace kvgate::discovery {

Result<std::unique_ptr<EndpointSource>> make_source(const SourceConfig& config, SourceSink& sink) {
  if (const auto* f = std::get_if<FileSourceConfig>(&config.params)) {
    return std::unique_ptr<EndpointSource>(new FileSource(*f, sink));
  }
  if (const auto* d = std::get_if<DnsSourceConfig>(&config.params)) {
    return std::unique_ptr<EndpointSource>(new DnsSource(*d, sink));
  }
  if (const auto* k = std::get_if<KubernetesSourceConfig>(&config.params)) {
    return std::unique_ptr<EndpointSource>(new KubernetesSource(*k, sink));
  }
  return Error(fmt::format("unknown discovery source kind '{}'", config.kind));
}

Status check_source(const SourceConfig& config) {
  if (const auto* f = std::get_if<FileSourceConfig>(&config.params)) return FileSource::check(*f);
  // DnsSource::start() refuses nothing: an unanswered name is an error reported later.
  if (std::get_if<DnsSourceConfig>(&config.params)) return {};
  if (const auto* k = std::get_if<KubernetesSourceConfig>(&config.params)) {
    return KubernetesSource::check(*k);
  }
  return Error(fmt::format("unknown discovery source kind '{}'", config.kind));
}

}  // namespace kvgate::discovery
