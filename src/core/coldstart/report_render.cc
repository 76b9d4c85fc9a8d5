#include "core/coldstart/report_render.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>

#include "core/common/xml.h"

namespace kvgate::coldstart {
namespace {

namespace json = boost::json;

json::value optional_number(const std::optional<double>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

// Fill colours per cache state (bar, whisker).
constexpr std::string_view kColdColor = "#d9534f";
constexpr std::string_view kKeptColor = "#337ab7";
constexpr std::string_view kRunsColor = "#5a5a5a";

std::string_view color_of(CacheState state) {
  switch (state) {
    case CacheState::kCold:
      return kColdColor;
    case CacheState::kCachesKept:
      return kKeptColor;
    case CacheState::kUnmanaged:
      break;
  }
  return kRunsColor;
}

}  // namespace

std::string report_json(const ColdstartReport& report, double warn_fraction) {
  json::object root;
  root["command"] = report.command;
  root["health_url"] = report.health_url;
  root["patterns"] = report.patterns;
  json::array phases;
  for (size_t i = 0; i < report.phase_names.size(); ++i) {
    phases.push_back(
        json::object{{"name", report.phase_names[i]},
                     {"label", i < report.phase_labels.size() ? report.phase_labels[i]
                                                              : report.phase_names[i]}});
  }
  root["phases"] = std::move(phases);
  json::array runs;
  for (const RunResult& run : report.runs) {
    json::object r;
    r["run"] = run.index;
    r["cache"] = cache_state_key(run.cache);
    r["outcome"] = run.outcome;
    json::object by_phase;
    for (size_t i = 0; i < report.phase_names.size(); ++i) {
      by_phase[report.phase_names[i]] =
          optional_number(i < run.phase_s.size() ? run.phase_s[i] : std::nullopt);
    }
    r["phases"] = std::move(by_phase);
    r["time_to_health_s"] = optional_number(run.health_s);
    runs.push_back(std::move(r));
  }
  root["runs"] = std::move(runs);
  json::array summary;
  for (const Column& c : summarize_report(report)) {
    json::array rows;
    for (const Row& row : c.rows) {
      json::object o{{"name", row.name}, {"label", row.label}};
      o["count"] = row.summary ? row.summary->count : 0;
      o["median_s"] = row.summary ? json::value(row.summary->median) : json::value(nullptr);
      o["min_s"] = row.summary ? json::value(row.summary->min) : json::value(nullptr);
      o["max_s"] = row.summary ? json::value(row.summary->max) : json::value(nullptr);
      rows.push_back(std::move(o));
    }
    summary.push_back(json::object{
        {"cache", cache_state_key(c.cache)}, {"runs", c.runs}, {"rows", std::move(rows)}});
  }
  root["summary"] = std::move(summary);
  json::array warnings;
  for (const std::string& w : spread_warnings(report, warn_fraction))
    warnings.push_back(json::value(w));
  root["warnings"] = std::move(warnings);
  return json::serialize(root) + "\n";
}

std::string report_svg(const ColdstartReport& report) {
  std::vector<Column> columns = summarize_report(report);
  constexpr int kLabelWidth = 190, kPlotWidth = 520, kValueWidth = 150, kBar = 14, kGap = 12;
  constexpr int kTop = 50, kLeft = 10;
  size_t rows = columns.empty() ? 0 : columns.front().rows.size();
  double scale_max = 0;
  for (const Column& c : columns) {
    for (const Row& row : c.rows) {
      if (row.summary) scale_max = std::max(scale_max, row.summary->max);
    }
  }
  if (scale_max <= 0) scale_max = 1;
  int group = static_cast<int>(columns.size()) * kBar + kGap;
  int height = kTop + static_cast<int>(rows) * group + 40;
  int width = kLeft + kLabelWidth + kPlotWidth + kValueWidth;
  auto x_of = [&](double s) { return kLeft + kLabelWidth + s / scale_max * kPlotWidth; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">Startup phases: median "
      "and range over runs (s)</text>\n",
      width, height, kLeft);
  // Legend.
  int lx = kLeft;
  for (const Column& c : columns) {
    std::string_view color = color_of(c.cache);
    svg +=
        fmt::format("<rect x=\"{}\" y=\"30\" width=\"12\" height=\"12\" fill=\"{}\"/>", lx, color);
    svg +=
        fmt::format("<text x=\"{}\" y=\"40\">{}</text>\n", lx + 16, column_title(c.cache, c.runs));
    lx += 170;
  }
  for (size_t r = 0; r < rows; ++r) {
    int y0 = kTop + static_cast<int>(r) * group;
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", kLeft,
                       y0 + static_cast<int>(columns.size()) * kBar / 2 + 4,
                       xml_escape(columns.front().rows[r].label));
    for (size_t ci = 0; ci < columns.size(); ++ci) {
      const Row& row = columns[ci].rows[r];
      int y = y0 + static_cast<int>(ci) * kBar;
      std::string_view color = color_of(columns[ci].cache);
      if (!row.summary) {
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"#777\">not seen</text>\n",
                           x_of(0) + 4, y + kBar - 3);
        continue;
      }
      const Summary& s = *row.summary;
      double x0 = x_of(0);
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
          "<title>{}: {}</title></rect>\n",
          x0, y + 1, x_of(s.median) - x0, kBar - 2, color, xml_escape(row.label), format_cell(s));
      int wy = y + kBar / 2;
      svg += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{2}\" x2=\"{1:.1f}\" y2=\"{2}\" stroke=\"black\"/>"
          "<line x1=\"{0:.1f}\" y1=\"{3}\" x2=\"{0:.1f}\" y2=\"{4}\" stroke=\"black\"/>"
          "<line x1=\"{1:.1f}\" y1=\"{3}\" x2=\"{1:.1f}\" y2=\"{4}\" stroke=\"black\"/>\n",
          x_of(s.min), x_of(s.max), wy, wy - 4, wy + 4);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>\n", x_of(s.max) + 6, y + kBar - 3,
                         format_cell(s));
    }
  }
  // Axis.
  int axis_y = kTop + static_cast<int>(rows) * group;
  svg += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{2:.1f}\" y2=\"{1}\" stroke=\"#999\"/>\n"
      "<text x=\"{0:.1f}\" y=\"{3}\">0</text><text x=\"{2:.1f}\" y=\"{3}\" "
      "text-anchor=\"end\">{4:.3g} s</text>\n",
      x_of(0), axis_y, x_of(scale_max), axis_y + 14, scale_max);
  svg += "</svg>\n";
  return svg;
}

}  // namespace kvgate::coldstart
