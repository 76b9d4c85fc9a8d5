// SvgPlot: line charts written as plain SVG text, for the reports of `kvgate sim` and
// `kvgate bench`.
//
// No plotting library: a chart is a frame, nice ticks on both axes (linear or log10), one
// polyline per series in a fixed palette, and a legend. Enough for a TTFT CDF per policy
// and throughput / TTFT against QPS, readable in a browser or on GitHub.
//
//   LineChart c{.title = "TTFT", .x_label = "seconds", .y_label = "fraction", .log_x = true};
//   c.series.push_back({"precise", {{0.1, 0.0}, {0.5, 0.9}}});
//   std::string svg = render_svg(c);
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kvgate::workload {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
  bool markers = false;                           // a dot at every point
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // non-positive values are left out on a log axis
  bool log_y = false;
  std::vector<Series> series;
  int width = 720;
  int height = 440;
};

std::string render_svg(const LineChart& chart);
// Several charts stacked top to bottom in one SVG document.
std::string render_svg_panels(const std::vector<LineChart>& charts);

// The empirical CDF of `values` as (value, fraction <= value) points, thinned to at most
// `max_points` so that large runs stay small files.
std::vector<std::pair<double, double>> cdf_points(std::vector<double> values,
                                                  size_t max_points = 400);

}  // namespace kvgate::workload
