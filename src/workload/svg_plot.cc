#include "workload/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/common/xml.h"

namespace kvgate::workload {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                    "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string tick_label(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e6 || a < 1e-3) return fmt::format("{:.0e}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1) return fmt::format("{:g}", std::round(v * 100) / 100);
  return fmt::format("{:g}", v);
}

// Maps data values onto one axis, linear or log10, with ticks.
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;  // in transformed units

  double tr(double v) const { return log ? std::log10(v) : v; }
  double frac(double v) const { return (tr(v) - lo) / (hi - lo); }

  void fit(double min_v, double max_v) {
    if (log) {
      lo = std::floor(std::log10(min_v));
      hi = std::ceil(std::log10(max_v));
      if (hi <= lo) hi = lo + 1;
      return;
    }
    if (max_v <= min_v) max_v = min_v + 1;
    const double step = nice_step(max_v - min_v);
    lo = std::floor(min_v / step) * step;
    hi = std::ceil(max_v / step) * step;
  }

  static double nice_step(double span) {
    const double raw = span / 6;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      if (raw <= m * mag) return m * mag;
    }
    return 10 * mag;
  }

  std::vector<double> ticks() const {
    std::vector<double> t;
    if (log) {
      for (double e = lo; e <= hi + 1e-9; e += 1) t.push_back(std::pow(10, e));
      return t;
    }
    const double step = nice_step(hi - lo);
    for (double v = lo; v <= hi + step * 1e-6; v += step)
      t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
    return t;
  }
};

}  // namespace

std::string render_svg(const LineChart& c) {
  size_t longest = 0;
  for (const Series& s : c.series) longest = std::max(longest, s.name.size());
  // Room for the legend: about 7 px per character of the longest name.
  const double left = 70, right = std::max(160.0, 50.0 + 7.0 * static_cast<double>(longest));
  const double top = 40, bottom = 55;
  const double width = std::max<double>(c.width, left + right + 300);
  const double pw = width - left - right, ph = c.height - top - bottom;
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
  double ymin = xmin, ymax = -xmin;
  for (const Series& s : c.series) {
    for (auto [x, y] : s.points) {
      if ((c.log_x && x <= 0) || (c.log_y && y <= 0) || !std::isfinite(x) || !std::isfinite(y)) {
        continue;
      }
      xmin = std::min(xmin, x), xmax = std::max(xmax, x);
      ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    }
  }
  if (!std::isfinite(xmin)) xmin = c.log_x ? 1 : 0, xmax = xmin * 10 + 1;
  if (!std::isfinite(ymin)) ymin = c.log_y ? 1 : 0, ymax = ymin * 10 + 1;
  Axis ax{c.log_x}, ay{c.log_y};
  ax.fit(xmin, xmax);
  ay.fit(c.log_y ? ymin : std::min(0.0, ymin), ymax);
  auto px = [&](double x) { return left + ax.frac(x) * pw; };
  auto py = [&](double y) { return top + (1 - ay.frac(y)) * ph; };

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
      width, c.height, width, c.height, left + pw / 2, xml_escape(c.title));
  for (double t : ax.ticks()) {
    const double x = px(t);
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
        x, top, x, top + ph, x, top + ph + 16, tick_label(t));
  }
  for (double t : ay.ticks()) {
    const double y = py(t);
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        left, y, left + pw, y, left - 6, y + 4, tick_label(t));
  }
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n"
      "<text x=\"16\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
      "{:.1f})\">{}</text>\n",
      left, top, pw, ph, left + pw / 2, top + ph + 40, xml_escape(c.x_label), top + ph / 2,
      top + ph / 2, xml_escape(c.y_label));

  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const char* color = kPalette[i % std::size(kPalette)];
    std::string pts;
    for (auto [x, y] : s.points) {
      if ((c.log_x && x <= 0) || (c.log_y && y <= 0) || !std::isfinite(x) || !std::isfinite(y)) {
        continue;
      }
      pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      if (s.markers) {
        out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", px(x),
                           py(y), color);
      }
    }
    if (!pts.empty()) {
      out += fmt::format(
          "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, pts);
    }
    const double ly = top + 10 + 20 * static_cast<double>(i);
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
        "stroke-width=\"3\"/>\n<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        left + pw + 12, ly, left + pw + 34, ly, color, left + pw + 40, ly + 4, xml_escape(s.name));
  }
  out += "</svg>\n";
  return out;
}

std::string render_svg_panels(const std::vector<LineChart>& charts) {
  // Each chart stays a complete <svg> element, nested at its offset (SVG allows nested
  // viewports), so render_svg needs no change.
  std::string body;
  double width = 0, height = 0;
  for (const LineChart& c : charts) {
    std::string one = render_svg(c);
    const size_t w_at = one.find("width=\"") + 7;
    width = std::max(width, std::stod(one.substr(w_at, one.find('"', w_at) - w_at)));
    one.replace(0, 4, fmt::format("<svg x=\"0\" y=\"{}\"", height));
    body += one;
    height += c.height;
  }
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{}</svg>\n",
      width, std::max(height, 1.0), width, std::max(height, 1.0), body);
}

std::vector<std::pair<double, double>> cdf_points(std::vector<double> values, size_t max_points) {
  std::vector<std::pair<double, double>> out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const size_t step = std::max<size_t>(1, n / std::max<size_t>(max_points, 2));
  for (size_t i = 0; i < n; i += step) {
    out.emplace_back(values[i], static_cast<double>(i + 1) / static_cast<double>(n));
  }
  if (out.back().second < 1) out.emplace_back(values.back(), 1.0);
  return out;
}

}  // namespace kvgate::workload
