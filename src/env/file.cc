#include "env/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
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

Result<std::vector<std::string>> write_files(
    const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error("cannot create " + dir + ": " + ec.message());
  std::vector<std::string> written;
  for (const auto& [name, text] : files) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return Error("cannot write " + path);
    out << text;
    if (!out) return Error("error writing " + path);
    written.push_back(path);
  }
  return written;
}

}  // namespace kvgate::env
