#include "env/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace kvgate::env {

Result<std::string> read_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Error("cannot read " + path + ": " + std::strerror(errno));
  std::string out;
  char buf[64 * 1024];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) out.append(buf, n);
  if (std::ferror(f.get())) return Error("cannot read " + path + ": " + std::strerror(errno));
  return out;
}

}  // namespace kvgate::env
