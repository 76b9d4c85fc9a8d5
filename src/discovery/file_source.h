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

 private:
  void run();
  void read_and_report();

  const FileSourceConfig config_;
  SourceSink& sink_;
  int inotify_ = -1;
  int wake_ = -1;  // eventfd: stop() writes it
  std::thread thread_;
  std::string last_error_;  // the thread's: the same error is logged once
};

}  // namespace kvgate::discovery
