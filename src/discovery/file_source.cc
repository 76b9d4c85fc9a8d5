#include "discovery/file_source.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "discovery/endpoint_list.h"
#include "env/file.h"

namespace kvgate::discovery {

namespace {

// An inotify instance watching the directory of `config.path` (the caller closes it).
// Errors: what start() refuses with, word for word.
Result<int> open_watch(const FileSourceConfig& config) {
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Error(std::string("inotify_init1: ") + std::strerror(errno));
  std::filesystem::path dir = std::filesystem::path(config.path).parent_path();
  if (dir.empty()) dir = ".";
  const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                        IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB;
  if (inotify_add_watch(fd, dir.c_str(), mask) < 0) {
    const std::string e = std::strerror(errno);
    ::close(fd);
    return Error("discovery file " + config.path + ": cannot watch " + dir.string() + ": " + e);
  }
  return fd;
}

}  // namespace

FileSource::FileSource(FileSourceConfig config, SourceSink& sink)
    : config_(std::move(config)), sink_(sink) {}

FileSource::~FileSource() { stop(); }

Status FileSource::check(const FileSourceConfig& config) {
  Result<int> fd = open_watch(config);
  if (!fd) return Error(fd.error());
  ::close(*fd);  // closing the instance removes its watch
  return {};
}

Status FileSource::start() {
  Result<int> fd = open_watch(config_);
  if (!fd) return Error(fd.error());
  inotify_ = *fd;
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_ < 0) return Error(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
  return {};
}

void FileSource::stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
    thread_.join();
  }
  if (inotify_ >= 0) ::close(inotify_);
  if (wake_ >= 0) ::close(wake_);
  inotify_ = wake_ = -1;
}

void FileSource::run() {
  using Clock = std::chrono::steady_clock;
  read_and_report();
  auto next_reread = Clock::now() + config_.reread;
  std::optional<Clock::time_point> settle_until;
  alignas(inotify_event) char buf[4096];
  while (true) {
    const auto now = Clock::now();
    auto until = next_reread;
    if (settle_until && *settle_until < until) until = *settle_until;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
    pollfd fds[2] = {{inotify_, POLLIN, 0}, {wake_, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (n < 0 && errno != EINTR) {
      sink_.error(std::string("poll: ") + std::strerror(errno));
      return;
    }
    if (n > 0 && (fds[1].revents & POLLIN)) return;  // stop()
    if (n > 0 && (fds[0].revents & POLLIN)) {
      // Drain the events; any in the directory may be ours (a rename, a symlink swap).
      while (::read(inotify_, buf, sizeof buf) > 0) {
      }
      if (!settle_until) settle_until = Clock::now() + config_.settle;
    }
    if ((settle_until && Clock::now() >= *settle_until) || Clock::now() >= next_reread) {
      settle_until.reset();
      read_and_report();
      next_reread = Clock::now() + config_.reread;
    }
  }
}

void FileSource::read_and_report() {
  Result<std::string> text = env::read_file(config_.path);
  Result<std::vector<DiscoveredEndpoint>> set =
      text ? parse_endpoint_list(*text, config_.path, config_.kv_events_bind)
           : Result<std::vector<DiscoveredEndpoint>>(Error(text.error()));
  if (!set) {
    if (set.error() != last_error_) {
      std::error_code ec;
      if (!read_once_ && !std::filesystem::exists(config_.path, ec)) {
        // Not there yet is how a file written by a sidecar or a ConfigMap starts: said
        // once, not warned about; the sink still counts it (the pool's discovery state).
        spdlog::info(
            "discovery: waiting for {}: it does not exist yet; no endpoints from it "
            "until it is written",
            config_.path);
      } else {
        spdlog::warn("discovery: {} (the last good set is kept)", set.error());
      }
      last_error_ = set.error();
    }
    sink_.error(set.error());
    return;
  }
  if (!last_error_.empty()) spdlog::info("discovery: {} reads again", config_.path);
  last_error_.clear();
  read_once_ = true;
  sink_.report(std::move(*set), /*resync=*/false);
}

}  // namespace kvgate::discovery
