// FileSource: endpoints from a YAML or JSON file in the `endpoints:` schema
// (endpoint_list.h), watched with inotify.
//
// It watches the file's directory, not the file, so that every way of replacing it is
// seen: a rewrite in place (IN_CLOSE_WRITE), an atomic rename over it (IN_MOVED_TO), a
// Kubernetes ConfigMap volume swapping its `..data` symlink, a deletion. After an event
// it waits `settle` for more (a writer's several writes are read once), then reads the
// whole file and parses it; it also re-reads every `reread` in case an event was missed.
// A file that does not parse (a partial write, bad YAML, a wrong field) or that is gone
// keeps the last good set: the error, with file:line:column: field, goes to the log and
// the sink. An empty list is a good read (the reconciler may hold it).
//
// A file missing at start is not refused: a sidecar or a ConfigMap may write it later.
// The source logs "waiting for FILE" once, reports the read error to the sink (so the
// pool's discovery state says the source has no endpoints and why) and reports the set
// when the file appears. What start() refuses is a directory it cannot watch; check()
// tries exactly that without starting (`kvgate serve --check`).
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "discovery/source.h"

namespace kvgate::discovery {

class FileSource : public EndpointSource {
 public:
  FileSource(FileSourceConfig config, SourceSink& sink);
  ~FileSource() override;
  Status start() override;
  void stop() override;

  // What start() would refuse, with the same message, without starting: adds the inotify
  // watch on the file's directory and removes it. The file itself need not exist.
  [[nodiscard]] static Status check(const FileSourceConfig& config);

 private:
  void run();
  void read_and_report();

  const FileSourceConfig config_;
  SourceSink& sink_;
  int inotify_ = -1;
  int wake_ = -1;  // eventfd: stop() writes it
  std::thread thread_;
  // The thread's.
  std::string last_error_;  // the same error is logged once
  bool read_once_ = false;  // a good read happened (a missing file is no longer "waited for")
};

}  // namespace kvgate::discovery
