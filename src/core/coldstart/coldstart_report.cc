#include "core/coldstart/coldstart_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvgate::coldstart {
namespace {

int decimals_for(double median) {
  double m = std::fabs(median);
  if (m >= 10) return 0;
  if (m >= 1) return 1;
  if (m >= 0.1) return 2;
  return 3;
}

Column make_column(const ColdstartReport& report, CacheState cache) {
  Column column{cache, 0, {}};
  std::vector<const RunResult*> runs;
  for (const RunResult& run : report.runs) {
    if (run.cache == cache) runs.push_back(&run);
  }
  column.runs = runs.size();
  auto row = [&](std::string name, std::string label, auto get) {
    std::vector<double> values;
    for (const RunResult* run : runs) {
      if (std::optional<double> v = get(*run)) values.push_back(*v);
    }
    column.rows.push_back(Row{std::move(name), std::move(label), summarize(values), runs.size()});
  };
  for (size_t i = 0; i < report.phase_names.size(); ++i) {
    std::string label = i < report.phase_labels.size() ? report.phase_labels[i] : "";
    if (label.empty()) label = report.phase_names[i];
    row(report.phase_names[i], label, [i](const RunResult& r) -> std::optional<double> {
      return i < r.phase_s.size() ? r.phase_s[i] : std::nullopt;
    });
  }
  row("time_to_health", "time to /health", [](const RunResult& r) { return r.health_s; });
  return column;
}

std::string cell_text(const Row& row) {
  if (!row.summary) return "-";
  std::string text = format_cell(*row.summary);
  if (row.summary->count < row.runs)
    text += fmt::format(" [{}/{} runs]", row.summary->count, row.runs);
  return text;
}

}  // namespace

std::string_view cache_state_name(CacheState state) {
  switch (state) {
    case CacheState::kCold:
      return "cold";
    case CacheState::kCachesKept:
      return "caches kept";
    case CacheState::kUnmanaged:
      break;
  }
  return "runs";
}

std::string_view cache_state_key(CacheState state) {
  switch (state) {
    case CacheState::kCold:
      return "cold";
    case CacheState::kCachesKept:
      return "caches-kept";
    case CacheState::kUnmanaged:
      break;
  }
  return "unmanaged";
}

std::string column_title(CacheState state, size_t runs) {
  std::string count = fmt::format("{} run{}", runs, runs == 1 ? "" : "s");
  if (state == CacheState::kUnmanaged) return count;
  return fmt::format("{}, {}", cache_state_name(state), count);
}

std::vector<Column> summarize_report(const ColdstartReport& report) {
  std::vector<Column> columns;
  for (CacheState cache : {CacheState::kUnmanaged, CacheState::kCold, CacheState::kCachesKept}) {
    bool present = std::any_of(report.runs.begin(), report.runs.end(),
                               [cache](const RunResult& r) { return r.cache == cache; });
    if (present) columns.push_back(make_column(report, cache));
  }
  return columns;
}

std::string format_cell(const Summary& s) {
  int d = decimals_for(s.median);
  return fmt::format("{:.{}f} s ({:.{}f}-{:.{}f})", s.median, d, s.min, d, s.max, d);
}

std::string format_table(const ColdstartReport& report) {
  std::vector<Column> columns = summarize_report(report);
  std::vector<std::vector<std::string>> grid;
  std::vector<std::string> header{"phase"};
  for (const Column& c : columns) {
    header.push_back(column_title(c.cache, c.runs));
  }
  grid.push_back(std::move(header));
  size_t rows = columns.empty() ? 0 : columns.front().rows.size();
  for (size_t r = 0; r < rows; ++r) {
    std::vector<std::string> line{columns.front().rows[r].label};
    for (const Column& c : columns) line.push_back(cell_text(c.rows[r]));
    grid.push_back(std::move(line));
  }
  std::vector<size_t> width(grid.front().size(), 0);
  for (const auto& line : grid) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  std::string out;
  for (const auto& line : grid) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      text += line[i];
      if (i + 1 < line.size()) text += std::string(width[i] - line[i].size() + 3, ' ');
    }
    out += text + "\n";
  }
  return out;
}

std::vector<std::string> spread_warnings(const ColdstartReport& report, double fraction) {
  std::vector<std::string> out;
  for (const Column& c : summarize_report(report)) {
    for (const Row& row : c.rows) {
      if (!row.summary || row.summary->count < 2 || !spread_exceeds(*row.summary, fraction)) {
        continue;
      }
      double spread = relative_spread(*row.summary);
      std::string pct = std::isinf(spread) ? "inf" : fmt::format("{:.0f}", spread * 100);
      std::string who = c.cache == CacheState::kUnmanaged
                            ? std::string("runs")
                            : std::string(cache_state_name(c.cache)) + " runs";
      out.push_back(fmt::format("{} differ by {}% (more than {:.0f}%) in {}: {}", who, pct,
                                fraction * 100, row.label, format_cell(*row.summary)));
    }
  }
  return out;
}

}  // namespace kvgate::coldstart
