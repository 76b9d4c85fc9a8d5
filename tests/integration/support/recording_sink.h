// A discovery SourceSink that records what a source reports, for the source tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "discovery/source.h"

namespace kvgate::testing {

class RecordingSink : public discovery::SourceSink {
 public:
  struct Report {
    std::vector<discovery::DiscoveredEndpoint> set;
    bool resync = false;
    std::chrono::steady_clock::time_point at;
  };

  void report(std::vector<discovery::DiscoveredEndpoint> set, bool resync) override {
    std::lock_guard lock(mu_);
    reports_.push_back({std::move(set), resync, std::chrono::steady_clock::now()});
    cv_.notify_all();
  }
  void error(std::string message) override {
    std::lock_guard lock(mu_);
    errors_.push_back(std::move(message));
    cv_.notify_all();
  }

  // Waits until `pred(reports, errors)` holds; false on timeout.
  bool wait(
      const std::function<bool(const std::vector<Report>&, const std::vector<std::string>&)>& pred,
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(reports_, errors_); });
  }
  // Waits for a report whose ready URLs are exactly `urls`.
  bool wait_for_urls(const std::set<std::string>& urls,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return wait(
        [&](const std::vector<Report>& r, const std::vector<std::string>&) {
          return !r.empty() && ready_urls(r.back()) == urls;
        },
        timeout);
  }
  static std::set<std::string> ready_urls(const Report& r) {
    std::set<std::string> out;
    for (const auto& e : r.set) {
      if (e.ready) out.insert(e.spec.url);
    }
    return out;
  }
  std::vector<Report> reports() {
    std::lock_guard lock(mu_);
    return reports_;
  }
  std::vector<std::string> errors() {
    std::lock_guard lock(mu_);
    return errors_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Report> reports_;
  std::vector<std::string> errors_;
};

}  // namespace kvgate::testing
