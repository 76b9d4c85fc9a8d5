#include "io/process_launch_time.h"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace kvgate::io {

std::chrono::steady_clock::time_point process_launch_time() {
  auto now = std::chrono::steady_clock::now();
  std::ifstream f("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return now;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  // After the name: state is field 3; starttime is field 22.
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long start_ticks = 0;
  long hz = ::sysconf(_SC_CLK_TCK);
  timespec boot{};
  if (!(fields >> start_ticks) || hz <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) {
    return now;
  }
  double age_s = static_cast<double>(boot.tv_sec) + static_cast<double>(boot.tv_nsec) / 1e9 -
                 static_cast<double>(start_ticks) / static_cast<double>(hz);
  if (age_s < 0 || age_s > 24 * 3600.0) return now;
  return now - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(age_s));
}

}  // namespace kvgate::io
