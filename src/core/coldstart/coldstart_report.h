// The results of a `kvgate coldstart` measurement, and the seed's kind of table made
// from them: per phase the median and range over the runs, then time to /health, one
// column per cache state (runs that started with the named caches empty are "cold", runs
// that started with the caches a previous run left are "caches kept").
//
//   ColdstartReport report = ...;           // filled by the runner
//   std::string table = format_table(report);
//   for (const std::string& w : spread_warnings(report, 0.2)) ...
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/coldstart/run_stats.h"

namespace kvgate::coldstart {

// What the named cache directories held when a run was launched: kCold when they were
// empty (or only --clean-cache dirs were named), kCachesKept when every --keep-cache dir
// held something, kUnmanaged when the tool was told about no cache directory at all.
enum class CacheState { kCold, kCachesKept, kUnmanaged };
std::string_view cache_state_name(CacheState state);  // "cold" | "caches kept" | "runs"
std::string_view cache_state_key(CacheState state);   // "cold" | "caches-kept" | "unmanaged"
// The column title: "cold, 3 runs", "caches kept, 1 run", "3 runs".
std::string column_title(CacheState state, size_t runs);

struct RunResult {
  int index = 0;  // 1-based, in launch order
  CacheState cache = CacheState::kCold;
  std::vector<std::optional<double>> phase_s;  // per phase of the pattern set; nullopt: not seen
  std::optional<double> health_s;              // launch to the first 200 from /health
  std::string outcome;                         // "ok", or why the run ended early
};

struct ColdstartReport {
  std::string command;  // the server command line, for the record
  std::string health_url;
  std::string patterns;  // the pattern set's name
  std::vector<std::string> phase_names;
  std::vector<std::string> phase_labels;
  std::vector<RunResult> runs;
};

// One cell of the table: a measure summarised over a column's runs.
struct Row {
  std::string name;   // phase name, or "time_to_health"
  std::string label;  // phase label, or "time to /health"
  std::optional<Summary> summary;
  size_t runs = 0;  // runs in the column (summary->count may be fewer)
};

struct Column {
  CacheState cache;
  size_t runs = 0;
  std::vector<Row> rows;  // the phases in order, then time to /health
};

// One column per cache state present, cold first. Runs whose outcome is not "ok" still
// count with the phases they reached.
std::vector<Column> summarize_report(const ColdstartReport& report);

// "28 s (23-33)": the median and range with a precision that fits the median.
std::string format_cell(const Summary& s);

// The table, with a header line, aligned in columns, ending in a newline.
std::string format_table(const ColdstartReport& report);

// One message per row and column whose runs differ by more than `fraction` of the median.
std::vector<std::string> spread_warnings(const ColdstartReport& report, double fraction);

}  // namespace kvgate::coldstart
