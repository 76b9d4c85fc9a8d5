// ProgressBar: a one-line progress bar on stderr for long runs (`kvgate sim`, `kvgate bench`).
//
// Redrawn at most every 200 ms of wall time with a carriage return, only when stderr is a
// terminal (or when forced), so logs and CI output stay clean.
//
//   ProgressBar bar("precise", /*enabled=*/true);
//   bar.update(done_fraction, "t=120s");
//   bar.finish();
#pragma once

#include <chrono>
#include <string>

namespace kvgate::env {

class ProgressBar {
 public:
  // enabled: draw at all; false also when stderr is not a terminal unless `force`.
  ProgressBar(std::string label, bool enabled, bool force = false);
  ~ProgressBar();

  // fraction in [0, 1]; `note` is shown after the bar.
  void update(double fraction, const std::string& note);
  // Draws the final state and ends the line.
  void finish(const std::string& note = "");

 private:
  void draw(double fraction, const std::string& note);

  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kvgate::env
