#include "env/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace kvgate::env {

ProgressBar::ProgressBar(std::string label, bool enabled, bool force)
    : label_(std::move(label)), enabled_(enabled && (force || isatty(STDERR_FILENO) == 1)) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fputc('\n', stderr);
}

void ProgressBar::update(double fraction, const std::string& note) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  draw(fraction, note);
}

void ProgressBar::finish(const std::string& note) {
  if (!enabled_) return;
  draw(1.0, note);
  std::fputc('\n', stderr);
  drawn_ = false;
}

void ProgressBar::draw(double fraction, const std::string& note) {
  constexpr int kWidth = 30;
  const double f = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(f * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  fmt::print(stderr, "\r{:<14} [{}] {:5.1f}% {}\x1b[K", label_, bar, f * 100, note);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace kvgate::env
