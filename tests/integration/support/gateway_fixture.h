// Helpers for the gateway integration tests: a `kvgate serve` process in front of real
// `kvgate engine` processes, with its config written to a temp file.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/metrics/prometheus_text.h"
#include "engine_fixture.h"

namespace kvgate::testing {

// The files write_temp_file wrote, removed when the test process exits: the gateways and
// engines it starts read them while it runs, and nothing of a run is left in /tmp.
class TempFiles {
 public:
  TempFiles() = default;
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  ~TempFiles() {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

  void add(const std::string& path) {
    std::lock_guard lock(mu_);
    paths_.insert(path);
  }

 private:
  std::mutex mu_;
  std::set<std::string> paths_;
};

inline TempFiles& temp_files() {
  static TempFiles files;
  return files;
}

// Writes `text` to a fresh file in the test temp dir and returns its path; the file is
// removed when the test process exits.
inline std::string write_temp_file(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid());
  temp_files().add(path);
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

// A gateway config for one pool "main" serving model "sim" at `engine_urls`.
inline std::string gateway_yaml(const std::vector<std::string>& engine_urls,
                                const std::string& policy = "round-robin",
                                const std::string& extra = "") {
  std::string y =
      "listeners:\n  - address: 127.0.0.1\n    port: 0\n"
      "timeouts: {header_ms: 2000, drain_ms: 20000, connect_ms: 1000}\n"
      "limits: {max_body_bytes: 65536, max_header_bytes: 8192}\n" +
      extra + "pools:\n  main:\n    block_size: 16\n    router:\n      policy: " + policy +
      "\n      overlap: approx\n    endpoints:\n";
  for (const std::string& u : engine_urls) y += "      - " + u + "\n";
  y += "models:\n  - name: sim\n    aliases: [sim-alias]\n    pool: main\n";
  return y;
}

struct GatewayProcess {
  std::unique_ptr<ChildProcess> proc;
  std::string url;

  explicit GatewayProcess(const std::string& yaml) {
    std::string config = write_temp_file("gateway.yaml", yaml);
    auto p = ChildProcess::spawn(kvgate_bin(), {"serve", config});
    if (!p) {
      ADD_FAILURE() << p.error();
      return;
    }
    proc = std::move(*p);
    auto u = proc->wait_for_url();
    if (!u) {
      ADD_FAILURE() << u.error();
      return;
    }
    url = *u;
  }

  // The admin API's URL, from the line `kvgate serve` prints; "" and a failure when it does
  // not come ("" alone when the gateway did not start: that failed already).
  std::string wait_for_admin_url() {
    if (!proc) return {};
    auto u = proc->wait_for_admin_url();
    if (!u) {
      ADD_FAILURE() << u.error();
      return {};
    }
    return *u;
  }

  io::HttpClientResponse post(const std::string& path, const std::string& body,
                              std::vector<io::HttpHeader> headers = {}) {
    headers.push_back({"Content-Type", "application/json"});
    auto r = io::http_fetch("POST", url + path, body, headers, std::chrono::seconds(30));
    if (!r) {
      ADD_FAILURE() << r.error();
      return {};
    }
    return *r;
  }

  double metric(const std::string& name, const metrics::Labels& labels = {}) {
    auto r = io::http_fetch("GET", url + "/metrics");
    if (!r) return -1;
    auto m = metrics::parse_prometheus_text(r->body);
    if (!m) {
      ADD_FAILURE() << m.error();
      return -1;
    }
    return m->value(name, labels).value_or(0);
  }
};

}  // namespace kvgate::testing
