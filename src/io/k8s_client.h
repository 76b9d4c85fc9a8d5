// KubeClient: kvgate's one Kubernetes API client. Endpoint discovery makes a GET of a
// whole object list (LIST) and a GET whose chunked body is a stream of JSON lines (WATCH);
// KubeScaleClient (k8s_scale_client.h) GETs and PATCHes the scale subresource through
// send().
//
// Connection settings are KubeConfig (k8s_scale_client.h): bearer token
// (re-read from token_file on every request, so a rotated service-account token is used
// from the next request on) and TLS verified against the CA bundle, or plain HTTP for a
// local `kubectl proxy` or a test server. load_kubeconfig() reads a kubeconfig file.
//
//   KubeClient k8s(*in_cluster_config());
//   auto list = k8s.get("/api/v1/namespaces/llm/pods?labelSelector=app%3Dvllm");
//   auto end = k8s.watch(path + "&watch=1&resourceVersion=" + rv, deadline,
//                        [](std::string_view line) { ...; return true; });
//
// Blocking, on the caller's thread. cancel() (any thread) ends a call in progress.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "core/common/result.h"
#include "io/k8s_scale_client.h"

namespace kvgate::io {

// The current context of a kubeconfig file: server (https:// or http://), CA
// (certificate-authority-data or certificate-authority), token or tokenFile, and the
// context's namespace (empty when it names none). Client certificates and exec plugins
// are not supported (the error says so).
struct Kubeconfig {
  KubeConfig connection;
  std::string ns;
};
Result<Kubeconfig> load_kubeconfig(const std::string& path);

struct KubeReply {
  unsigned status = 0;
  std::string body;
};

class KubeClient {
 public:
  explicit KubeClient(KubeConfig config);

  // The whole response (any status: the caller reads Status objects itself). Errors:
  // no connection, TLS failure, timeout, an unreadable token file.
  Result<KubeReply> get(const std::string& target);
  // Any method with an optional body (PATCH with application/merge-patch+json, say); the
  // whole response, any status.
  struct Request {
    std::string method = "GET";
    std::string target;
    std::string body;
    std::string content_type;
  };
  Result<KubeReply> send(const Request& request);
  // Streams the body line by line into `on_line` (false stops). Returns the status when
  // the server ends the stream (or, for a non-200 answer, after reading its body into
  // `error_body`), or `deadline_reached` once `deadline` passes with the stream healthy.
  struct WatchEnd {
    unsigned status = 0;
    bool deadline_reached = false;
    std::string error_body;
  };
  Result<WatchEnd> watch(const std::string& target, std::chrono::steady_clock::time_point deadline,
                         const std::function<bool(std::string_view)>& on_line);
  // Ends the call in progress (and makes later ones fail at once).
  void cancel();
  // Ends the call in progress with an "interrupted" error, or the next call when none is
  // in progress; the calls after that work. clear_interrupt() drops one not delivered
  // yet. For a caller whose next request must differ (a watch whose selector changed).
  void interrupt();
  void clear_interrupt();

  struct CallResult {
    WatchEnd end;
    KubeReply whole;
  };

 private:
  Result<std::string> token() const;
  Result<CallResult> perform(const Request& request, std::chrono::steady_clock::time_point deadline,
                             const std::function<bool(std::string_view)>* on_line);
  const KubeConfig config_;
  std::mutex mu_;
  bool cancelled_ = false;                      // guarded by mu_
  bool interrupted_ = false;                    // guarded by mu_: not delivered yet
  boost::asio::io_context* running_ = nullptr;  // guarded by mu_: the call in progress
};

}  // namespace kvgate::io
