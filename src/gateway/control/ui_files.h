// The admin status page's files (src/gateway/control/ui/), embedded in the binary at build time
// by cmake/embed_files.cmake: the page is served by the admin API (GET /admin/ui,
// admin_api.h) without reading a file, so it is the page of the binary that runs.
//
//   for (const EmbeddedFile& f : ui_files()) if (f.name == "status.js") return f.body;
#pragma once

#include <span>
#include <string_view>

namespace kvgate::gateway {

struct EmbeddedFile {
  std::string_view name;          // "status.html"
  std::string_view content_type;  // "text/html; charset=utf-8"
  std::string_view body;
};

// Every embedded file, in the order CMakeLists.txt lists them (status.html first).
// Static data: thread-safe.
std::span<const EmbeddedFile> ui_files();

}  // namespace kvgate::gateway
